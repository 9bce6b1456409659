"""Bridges to the tools users already work in, each an optional extra.

* :mod:`recordkeeper.integrations.mlflow` (extra ``mlflow``): the data versions a run trained on
  as MLflow dataset inputs and run tags; the tracked checkpoint manager logs them by itself
  while an MLflow run is active, and records the run id in each checkpoint's metadata.
* :mod:`recordkeeper.integrations.openlineage` (extra ``openlineage``): OpenLineage run events
  for publishing a version and for training a checkpoint, opt-in by setting.
* :mod:`recordkeeper.integrations.hf` (extra ``hf``): a version's split as a Hugging Face
  ``datasets`` dataset (``DatasetVersion.to_hf_dataset``), decoded without TensorFlow.
* :mod:`recordkeeper.integrations.pandas` (extra ``hf``, or pandas alone): listings and answers
  as ``pandas.DataFrame`` (``to_pandas``).
* :mod:`recordkeeper.integrations.html`: notebook display (``_repr_html_``), no dependency.

Importing :mod:`recordkeeper` imports none of them (nor MLflow, OpenLineage, datasets, pandas).
"""
