"""The actor runtime: one interface, a threads backend and a deterministic simulator."""
