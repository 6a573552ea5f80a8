"""Static-files storage of the production deployment (``STORAGES["staticfiles"]``).

WhiteNoise's ``CompressedManifestStaticFilesStorage`` (hashed names, a manifest, gzip/brotli
copies) with one change: ``sourceMappingURL`` comments are left as they are instead of being
rewritten to the hashed name of the map.

Why: Django's ``HashedFilesMixin.patterns`` (Django >= 4.1) treats the ``//# sourceMappingURL=...``
line of every ``*.js`` and the ``/*# sourceMappingURL=... */`` line of every ``*.css`` as a
reference that must exist. Vendored minified libraries are copied without their ``.map`` files
(``static/vendor/*/VERSION`` says which file of which npm package, unmodified), so
``collectstatic`` stopped with ``MissingFileError`` on ``graphology.umd.min.js.map``, wrote no
manifest, and every page that uses ``{% static %}`` was a 500. Editing the vendored file would break
"unmodified" and come back with the next update; a source map is a debugging aid the browser asks
for only with its developer tools open, so an unhashed (or absent) map costs nothing. Every other
reference (CSS ``url()`` and ``@import``) stays checked strictly: a missing image or font still
fails ``collectstatic``.
"""

from __future__ import annotations

from django.contrib.staticfiles.storage import HashedFilesMixin
from whitenoise.storage import CompressedManifestStaticFilesStorage


def _without_source_maps(patterns: tuple) -> tuple:
    """``HashedFilesMixin.patterns`` without the ``sourceMappingURL`` rules (same shape:
    ``((glob, (pattern | (pattern, template), ...)), ...)``)."""

    def is_map(rule) -> bool:
        return "sourceMappingURL" in (rule[0] if isinstance(rule, tuple | list) else rule)

    out = []
    for glob, rules in patterns:
        kept = tuple(rule for rule in rules if not is_map(rule))
        if kept:
            out.append((glob, kept))
    return tuple(out)


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Hashed, compressed static files with a manifest; source-map comments not rewritten (see the
    module docstring). Raises ``whitenoise.storage.MissingFileError`` in ``collectstatic`` for a
    missing file referenced by CSS ``url()``/``@import``, like its parent."""

    patterns = _without_source_maps(HashedFilesMixin.patterns)
