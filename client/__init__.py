"""WhisperWire's Python clients: stream a file, caption the microphone, and watch a session.

They speak protocol v1 through :mod:`whisperwire.server.wire`, the one definition of it.
"""
