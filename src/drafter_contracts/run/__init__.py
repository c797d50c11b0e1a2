"""The pytest side of a check: options, the plugin, the worker side, the controller and what travels between them.

Split as pytest-xdist splits plugin / dsession / remote:

``options``      the pytest11 entry point: every option parsed and every input checked before any heavy import
                 (exit 4); registers ``plugin`` only for ``--dataset-path`` / ``--masker`` runs
``option_checks`` the command line parsed and checked once (``RunOptions``): values, inputs on disk, the
                 contract and its tokenizer; read by ``options``, ``plugin`` and the masker suite
``option_help``  help texts that list what exists, read from the registries that define it
``worker_count`` never more xdist workers than shards (``-n auto`` and an explicit ``-n N`` alike)
``plugin``       pytest configuration: builds the engine, the fixture, one test per shard
``worker``       the tests' bodies, run where the shard is (an xdist worker or the ``-n 0`` process)
``wire``         a shard's ``ShardReport``, encoded once on the worker and decoded by the controller
``controller``   ``ContractRun``: reads every test report, folds it into the reducer, writes the reports
``allocator``    glibc malloc settings for a process that checks shards

Nothing here is imported by a user: pytest loads ``options`` through the entry point.
"""
