"""Extended QUIC Interop Runner: goodput measurements of QUIC stacks over SSH-driven nodes."""

__version__ = "0.1.0"
