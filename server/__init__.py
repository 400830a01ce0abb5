"""WhisperWire server: real-time captions over a WebSocket (protocol v1, see ``wire``)."""

import os

# numpy's OpenBLAS threads busy-wait after every call; the server's numpy work (mel features,
# resampling) is small, and those spinning threads doubled the CPU cost of each decode (measured:
# 1.48 CPU-s for 0.75 s of decoding). CTranslate2 has its own threads. Takes effect when
# whisperwire.server is imported before numpy, as the CLI does; set it yourself otherwise.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
