"""Adapters that put Airlock's gate under agent frameworks (each imports its framework lazily)."""
