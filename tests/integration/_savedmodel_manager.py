"""The guide's ``SavedModelCheckpointManager`` for the tests: recordkeeper's stand-in
(:mod:`recordkeeper.tf.savedmodel_manager`), since tensorflow/models cannot be installed beside
``tensorflow-cpu`` here."""

from recordkeeper.tf.savedmodel_manager import (
    SAVED_MODULES_PATH_SUFFIX,
    SavedModelCheckpointManager,
    saved_modules_directory,
)

__all__ = ["SAVED_MODULES_PATH_SUFFIX", "SavedModelCheckpointManager", "saved_modules_directory"]
