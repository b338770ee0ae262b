"""toolfold: bounded, streamed, durable and replicated tool output for agent harnesses.

Layers (arrows point to what a layer may import)::

    cli, server --> harness --> output --> chord
                      |           |
                      +--> execenv (no chord, no storage)
                      +--> storage --> chord (WireOp type / is_base only)
"""

__version__ = "0.1.0"
