"""The read models at work: the projection runner, waiting for a position, the worker.

Build them with ``build_read_models``; the gRPC server runs the projection in
a background thread (SESSIONSTORE_PROJECTIONS=inprocess), leaves it to a
``sessionstore-worker`` process (worker), or neither (off).
"""

from services.readmodels.service import ReadModels, ReadModelsBehind, build_read_models

__all__ = ["ReadModels", "ReadModelsBehind", "build_read_models"]
