"""Scenario files (format v1): loading, replay, expectations, invariants."""
