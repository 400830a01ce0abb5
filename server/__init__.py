"""WhisperWire server: real-time captions over a WebSocket (protocol v1, see ``wire``)."""

__version__ = "0.1.0"
