"""WhisperWire's Python clients: stream a file, (later) the microphone, and watch captions.

They speak protocol v1 through :mod:`whisperwire.server.wire`, the one definition of it.
"""
