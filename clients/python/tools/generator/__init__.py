"""The client's code generator, a module per job; ``tools/generate.py`` runs it.

* ``paths``: where the .proto is and where the client's sources are;
* ``protoc``: the .proto as protoc describes it, and the protobuf modules;
* ``api``: the described .proto as the generated code sees it: its sections,
  each message's attributes, the service's RPCs;
* ``source``: the pieces of Python source every generated module uses;
* ``types_modules``: ``types.py`` and ``_types/``, the dataclasses and enums;
* ``methods_modules``: ``_methods/``, a method per RPC.
"""
