"""Airlock SDK: the client that agents embed to send tool calls through Airlock."""

__version__ = "0.1.0"
