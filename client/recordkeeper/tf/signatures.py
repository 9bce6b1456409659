"""What a SavedModel's serving signatures parse: :func:`model_inputs`.

Reads ``saved_model.pb`` (no variables are loaded, no function is traced) and finds every
``ParseExampleV2``, ``ParseExample`` and ``ParseSingleExample`` op in its graph and function
library — where ``tf.io.parse_example`` inside a ``@tf.function`` serving signature ends up.
Each op gives its keys (constant inputs, or attributes for ``ParseSingleExample``), the dtypes
and, for dense keys, the shapes and whether a default value was given.  A model that parses
nothing itself (a Keras model served on tensors) is described by its signatures' tensor inputs
instead, matched to features by name.

The result is what :class:`~recordkeeper.tf.checkpoints.TrackedCheckpointManager` records with
each ``ckpt-N_saved_modules/<name>`` export and what ``recordkeeper check-model`` compares with
a version's schema (:mod:`recordkeeper.core.model_inputs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from recordkeeper.core.model_inputs import ModelInput

__all__ = ["model_inputs"]

_PARSE_OPS = ("ParseExampleV2", "ParseExample", "ParseSingleExample")


def _load_proto(export_dir: str) -> Any:
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(f"{export_dir.rstrip('/')}/saved_model.pb", "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def _node_name(ref: str) -> str:
    """``"scope/keys:output:0"``, ``"keys:0"`` or ``"^keys"`` → ``"scope/keys"`` / ``"keys"``."""
    name = ref.lstrip("^")
    if ":" in name:
        name = name.split(":", 1)[0]
    return name


def _graphs(proto: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, {node name: NodeDef}) for every graph body: each meta graph and each function."""
    for meta in proto.meta_graphs:
        yield "graph", {n.name: n for n in meta.graph_def.node}
        for function in meta.graph_def.library.function:
            yield function.signature.name, {n.name: n for n in function.node_def}


def _constant(nodes: dict[str, Any], ref: str) -> Any:
    """The numpy value of the constant feeding ``ref`` (through Identity and Reshape ops), or
    None."""
    import tensorflow as tf

    seen = 0
    node = nodes.get(_node_name(ref))
    while node is not None and node.op in ("Identity", "IdentityN", "Reshape") and seen < 16:
        node = nodes.get(_node_name(node.input[0]))
        seen += 1
    if node is None or node.op != "Const":
        return None
    return tf.make_ndarray(node.attr["value"].tensor)


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    return [v.decode() if isinstance(v, bytes) else str(v) for v in value.reshape(-1).tolist()]


def _dtype_names(attr: Any) -> list[str]:
    import tensorflow as tf

    return [tf.as_dtype(t).name for t in attr.list.type]


def _shapes(attr: Any) -> list[tuple[int | None, ...] | None]:
    shapes: list[tuple[int | None, ...] | None] = []
    for shape in attr.list.shape:
        if shape.unknown_rank:
            shapes.append(None)
        else:
            shapes.append(tuple(None if d.size < 0 else int(d.size) for d in shape.dim))
    return shapes


def _inputs_of(node: Any, nodes: dict[str, Any], where: str) -> list[ModelInput]:
    """The keys one parse op reads, as model inputs."""
    attrs = node.attr
    data_inputs = [i for i in node.input if not i.startswith("^")]
    tdense = _dtype_names(attrs["Tdense"]) if "Tdense" in attrs else []
    dense_shapes = _shapes(attrs["dense_shapes"]) if "dense_shapes" in attrs else []
    sparse_types = _dtype_names(attrs["sparse_types"]) if "sparse_types" in attrs else []
    ragged_types = (
        _dtype_names(attrs["ragged_value_types"]) if "ragged_value_types" in attrs else []
    )
    if node.op == "ParseExampleV2":
        # serialized, names, sparse_keys, dense_keys, ragged_keys, dense_defaults...
        sparse_keys = _texts(_constant(nodes, data_inputs[2]))
        dense_keys = _texts(_constant(nodes, data_inputs[3]))
        ragged_keys = _texts(_constant(nodes, data_inputs[4]))
        defaults = data_inputs[5 : 5 + len(tdense)]
    elif node.op == "ParseExample":
        # serialized, names, sparse_keys x Nsparse, dense_keys x Ndense, dense_defaults...
        n_sparse, n_dense = attrs["Nsparse"].i, attrs["Ndense"].i
        sparse_keys = [
            key for ref in data_inputs[2 : 2 + n_sparse] for key in _texts(_constant(nodes, ref))
        ]
        start = 2 + n_sparse
        dense_keys = [
            key
            for ref in data_inputs[start : start + n_dense]
            for key in _texts(_constant(nodes, ref))
        ]
        ragged_keys = []
        defaults = data_inputs[start + n_dense : start + n_dense + n_dense]
    else:  # ParseSingleExample: keys are attributes; serialized, dense_defaults...
        sparse_keys = [k.decode() for k in attrs["sparse_keys"].list.s]
        dense_keys = [k.decode() for k in attrs["dense_keys"].list.s]
        ragged_keys = []
        defaults = data_inputs[1 : 1 + len(tdense)]
    found = []
    for i, key in enumerate(dense_keys):
        default = _constant(nodes, defaults[i]) if i < len(defaults) else None
        found.append(
            ModelInput(
                key,
                "dense",
                tdense[i] if i < len(tdense) else "unknown",
                dense_shapes[i] if i < len(dense_shapes) else None,
                has_default=default is not None and default.size > 0,
                signature=where,
            )
        )
    for i, key in enumerate(sparse_keys):
        dtype = sparse_types[i] if i < len(sparse_types) else "unknown"
        found.append(ModelInput(key, "sparse", dtype, None, signature=where))
    for i, key in enumerate(ragged_keys):
        dtype = ragged_types[i] if i < len(ragged_types) else "unknown"
        found.append(ModelInput(key, "ragged", dtype, None, signature=where))
    return found


def _signature_tensors(proto: Any) -> Iterable[ModelInput]:
    import tensorflow as tf

    for meta in proto.meta_graphs:
        for signature_name, signature in sorted(meta.signature_def.items()):
            if signature_name.startswith("__"):  # __saved_model_init_op and friends
                continue
            for name, info in sorted(signature.inputs.items()):
                shape: tuple[int | None, ...] | None = None
                if not info.tensor_shape.unknown_rank:
                    dims = [None if d.size < 0 else int(d.size) for d in info.tensor_shape.dim]
                    shape = tuple(dims[1:])  # without the batch dimension
                yield ModelInput(
                    name, "tensor", tf.as_dtype(info.dtype).name, shape, signature=signature_name
                )


def model_inputs(export_dir: str) -> list[ModelInput]:
    """What the SavedModel at ``export_dir`` (a local path or ``gs://`` URL) expects per example.

    The keys its parse ops read (dense with dtype, shape and default; sparse; ragged), each
    once, in graph order; or, when it parses nothing, its signatures' tensor inputs.
    """
    proto = _load_proto(export_dir)
    found: dict[tuple[str, str], ModelInput] = {}
    for where, nodes in _graphs(proto):
        for node in nodes.values():
            if node.op in _PARSE_OPS:
                for item in _inputs_of(node, nodes, where):
                    found.setdefault((item.name, item.kind), item)
    if found:
        return list(found.values())
    return list({(i.name, i.kind): i for i in _signature_tensors(proto)}.values())
