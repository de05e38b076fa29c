"""Adapters to other frameworks, each behind an optional extra (``langgraph``: :mod:`.langgraph`)."""
