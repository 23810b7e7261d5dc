# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The API's messages, a module per section of the .proto, and its enums.

Import them from sessionstore_client.types, which has them all.
"""
