"""The pure core of recordkeeper: every rule that defines the product, written once.

No I/O, no HTTP, no SQLAlchemy, no TensorFlow, no third-party package: only the standard library
and other ``recordkeeper.core`` modules.  The client, the CLI and the service import these
modules; none re-implements them.

================  ==========================================================================
module            rule
================  ==========================================================================
``errors``        typed errors with stable codes; HTTP status ↔ code map
``naming``        dataset names, the ``rk1`` version name convention
``refs``          the reference grammar (``coco@v3``, ``coco@sha256:…``)
``digests``       sha256 / crc32c / ``sha256:`` digests: one parser, one formatter
``splits``        the split name grammar
``shards``        the shard record: fields, validation, wire form; compressions
``manifest``      the canonical manifest and ``content_digest``
``canonical``     canonical JSON bytes (what digests hash)
``schema``        the feature schema model (inference and export live outside the core)
``roots``         storage URI normalisation and the allowed-roots check
``lineage``       model/checkpoint names, ``model/ckpt-N`` references, roles, parent kinds;
                  the lineage answers both sides share (consumer, lineage entry, segment)
``diff``          what changed between two versions (shards, counts per split, schema)
``limits``        text and number limits (64-bit bounds, shard counts, lengths)
``provenance``    a version's parents, sources, producer, params: rules and canonical params
``secrets``       credentials in recorded text: URL userinfo and token parameters, commands
``version``       the package version
``file_kinds``    what a file looks like from its first bytes (TFRecord, Riegeli, Parquet...)
``riegeli``       the Riegeli/records file layout: blocks, block and chunk headers, chunk ends
``record_identity``  what "the same record" is: the record hash, the canonical Example form
``record_index``  the per-shard record index format, the streaming merge, the set digests
``record_diff``   record-level diff and split leakage over sorted indexes
``display``       HTML tables for notebook display (``_repr_html_``), every value escaped
================  ==========================================================================
"""
