"""The kernel: the library every Weft app builds on, at the bottom of the house.

It imports no app (``tests/test_import_graph.py``): errors, model/serializer fields and the
``__any`` lookup, task locks and process identity, bulk writes, the REST API's base classes and its
one domain-error → HTTP handler, the realtime (Channels) publisher, a cache that may fail, query
parameter and URL converters, CSV cells, a log that counts repeats, and the HTTP/websocket
middleware the composition root (``weft/``) wires in.
"""
