"""The REST API's shared pieces: base view classes (``views``), the one exception handler that maps
domain errors to HTTP (``errors``) and the OpenAPI post-processing (``schema``)."""
