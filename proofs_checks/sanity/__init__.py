"""``tverify check <topic>`` subcommands: one module per topic, each exposing ``command``
(a ``click.Command``). They validate user input (raising ``theory.validation.InputError`` for
mistakes), call ``theory``/``numerics`` and print closed forms, measured numbers and a verdict."""
