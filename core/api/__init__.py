"""The REST API's shared pieces: base view classes (``views``), the serializer base with NetBox's
``brief_fields`` (``serializers``), the one exception handler that maps domain errors to HTTP
(``errors``) and the OpenAPI schema class and post-processing (``schema``)."""
