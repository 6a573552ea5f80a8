"""Django settings for Weft.

Two deployments from one module, chosen by the environment (see README "Configuration"):

* **Embedded** (no ``DATABASE_URL``/``REDIS_URL``): SQLite under ``WEFT_DATA_DIR``, Channels'
  in-memory layer, and Celery tasks run by an in-process worker and beat
  (``weft.inprocess``) inside the web process.
* **Production** (``DATABASE_URL`` and ``REDIS_URL`` set): PostgreSQL, Redis as the Celery
  broker and the Channels layer, separate ``celery worker``/``celery beat`` processes.
"""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE as CSP_NONCE
from csp.constants import NONE as CSP_NONE
from csp.constants import SELF as CSP_SELF
from django.core.exceptions import ImproperlyConfigured

# Pure modules (no Django import) that own a default or a list a setting is checked against.
from weft.auth_settings import authentication_backends, ldap_auth_settings, oidc_auth_settings
from weft.env import (
    env_bool,
    env_choice,
    env_fernet_keys,
    env_float,
    env_int,
    env_int_map,
    env_list,
    env_pairs,
    env_str,
    parse_email_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("WEFT_DATA_DIR", str(BASE_DIR / "data")))

DEV_SECRET_KEY = "weft-development-key-not-for-production"
SECRET_KEY = env_str("SECRET_KEY", DEV_SECRET_KEY)
DEBUG = env_bool("WEFT_DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
#: Embedded mode: one process, SQLite, in-memory channel layer, in-process worker.
EMBEDDED = not (DATABASE_URL and REDIS_URL)
PRODUCTION = env_bool("WEFT_PRODUCTION", not EMBEDDED)

if PRODUCTION and not any(cmd in sys.argv for cmd in ("collectstatic",)):
    if SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 32:
        raise ImproperlyConfigured(
            "Weft production settings refuse to start with the development SECRET_KEY: "
            "set SECRET_KEY to a random string of at least 32 characters."
        )
    if DEBUG:
        raise ImproperlyConfigured("Weft production settings refuse to start with WEFT_DEBUG on: unset it.")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "core",
    "weft",
    "accounts",
    "lab",
    "fabric",
    "telemetry",
    "events",
    "pools",
    "scheduler",
    "ufm",
    "devices",
    "routing",
    "outbound",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.busy.PoolTimeoutMiddleware",  # a request that waited past the DB pool's timeout: 503
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "accounts.middleware.AuditUserMiddleware",
]

ROOT_URLCONF = "weft.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.roles",
            ],
        },
    },
]
WSGI_APPLICATION = None
ASGI_APPLICATION = "weft.asgi.application"

#: PostgreSQL connection pool per process (Django's psycopg pool, ``psycopg_pool.ConnectionPool``):
#: connections kept open, the most open at once, and how long a request waits for a free one
#: before it fails (``psycopg_pool.PoolTimeout``: a 500, logged). 0 as the
#: maximum turns the pool off (one persistent connection per thread, CONN_MAX_AGE 60 s).
#: daphne runs each request's sync code on a thread of its own (asgiref's thread-sensitive
#: executor, one per request context), so without the pool every concurrent request held a
#: connection, and CONN_MAX_AGE kept it open after the request: the pool bounds both. A pool
#: needs CONN_MAX_AGE 0 (Django returns the connection to the pool at the end of each request).
WEFT_DB_POOL_MIN = env_int("WEFT_DB_POOL_MIN", 2, min_value=0)
WEFT_DB_POOL_MAX = env_int("WEFT_DB_POOL_MAX", 10, min_value=0)
WEFT_DB_POOL_TIMEOUT_S = env_float("WEFT_DB_POOL_TIMEOUT_S", 30.0, positive=True)
if WEFT_DB_POOL_MAX and WEFT_DB_POOL_MIN > WEFT_DB_POOL_MAX:
    raise ImproperlyConfigured(
        f"WEFT_DB_POOL_MIN={WEFT_DB_POOL_MIN} is above WEFT_DB_POOL_MAX={WEFT_DB_POOL_MAX}"
    )
if DATABASE_URL:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=0 if WEFT_DB_POOL_MAX else 60)
    if WEFT_DB_POOL_MAX and _database["ENGINE"] == "django.db.backends.postgresql":
        _database.setdefault("OPTIONS", {})["pool"] = {
            "min_size": WEFT_DB_POOL_MIN,
            "max_size": WEFT_DB_POOL_MAX,
            "timeout": WEFT_DB_POOL_TIMEOUT_S,
        }
    DATABASES = {"default": _database}
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("WEFT_SQLITE_PATH", str(DATA_DIR / "weft.sqlite3")),
            # Threads of the in-process worker write too: wait instead of "database is locked".
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "accounts:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(
    env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles" if PRODUCTION else DATA_DIR / "static"))
)
if not PRODUCTION:
    # whitenoise serves from the app folders (WHITENOISE_USE_FINDERS) but wants STATIC_ROOT to exist.
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "core.storage.StaticFilesStorage"  # hashed + compressed; source maps not rewritten
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Embedded: serve static files straight from the app folders (no collectstatic step).
WHITENOISE_USE_FINDERS = not PRODUCTION
MEDIA_ROOT = DATA_DIR / "media"
DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated request with the first class's challenge, so
    # anonymous API calls get 401 + "WWW-Authenticate: Token" (session first gave 403, which the
    # role checks also use for "signed in, role too low").
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.RolePermission"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.WeftLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.AutoSchema",  # brief forms: Brief<Name> components
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",  # + 409 for a uniqueness race
    # DRF's three, the JSON one refusing 1e999 and nesting beyond the stack (400, not 500)
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Weft API",
    "DESCRIPTION": "InfiniBand fabric and GPU-pool manager.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],  # schema and docs too
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # choice sets shared by several fields get one component each (pools: GPU and slice state,
    # current and pending MIG mode, report source)
    "ENUM_NAME_OVERRIDES": {
        "GpuStateEnum": "pools.choices.GpuState",
        "MigModeEnum": "pools.choices.MigMode",
        "ReportSourceEnum": "pools.choices.ReportSource",
        "GpuHealthEnum": "pools.choices.Health",
        # two "source" enums (Discovery.source, Partition.source): named, not numbered
        "DiscoverySourceEnum": "fabric.choices.DiscoverySource",
        "PartitionSourceEnum": "fabric.choices.PartitionSource",
        # two "role" enums (a user's site role, a tenant membership's role)
        "TenantRoleEnum": "pools.choices.TenantRole",
        "UserRoleEnum": ["none", "viewer", "operator", "admin"],
        # a fabric's and a switch's role (compute, storage, management)
        "FabricRoleEnum": "fabric.choices.FabricRole",
        # two "state" enums besides the GPU's (an allocation's, a job's)
        "AllocationStateEnum": "pools.choices.AllocationState",
        "JobStateEnum": "scheduler.choices.JobState",
        # a job's kind (an allocation item's kind has the same values: one enum, JobKind)
        "JobKindEnum": "scheduler.choices.JobKind",
        # an alarm's severity and an alert target's min_severity: one enum
        "SeverityEnum": "events.choices.Severity",
        # a discovery's and a sweep's status
        "DiscoveryStatusEnum": "fabric.choices.DiscoveryStatus",
        "SweepStatusEnum": "telemetry.models.SweepStatus",
    },
    # a component's description is its serializer's docstring, not that of the kernel's base class
    "GET_LIB_DOC_EXCLUDES": "core.api.schema.lib_doc_excludes",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.brief_alternatives",
        "core.api.schema.default_error_responses",
    ],
}

# --- Accounts and browser security (issue 9) ------------------------------------------------------
# One block on purpose (it extends INSTALLED_APPS, MIDDLEWARE and REST_FRAMEWORK from above):
# sign-in throttling (django-axes), API tokens (accounts.ApiToken, hashed; DRF's authtoken app is
# replaced), the Content-Security-Policy (django-csp).
INSTALLED_APPS += ["axes", "csp"]
# Axes last (its docs): it turns a lock-out flagged during the view into its response.
MIDDLEWARE += ["csp.middleware.CSPMiddleware", "axes.middleware.AxesMiddleware"]
# --- Sign-in through the site's directory (issue 26; accounts.directory, README "Configuration") ---
# Both optional: unset WEFT_LDAP_URI and WEFT_OIDC_ISSUER leave only local accounts. Directory users'
# roles and tenants follow their groups at each sign-in; local accounts keep signing in with their
# Weft password (break-glass), also while the directory is down.
#: LDAP / Active Directory: the server URI(s) (``ldap://dc1.example.org ldaps://dc2.example.org``,
#: space-separated, tried in turn), STARTTLS on ``ldap://``, the service account that searches
#: (empty: anonymous search), where users are (the filter's ``%(user)s`` is the typed name; Active
#: Directory: ``(sAMAccountName=%(user)s)``, with
#: ``(!(userAccountControl:1.2.840.113556.1.4.803:=2))`` to leave out disabled accounts), where
#: groups are and their schema, the seconds one LDAP operation may take, and a group whose members
#: are refused.
WEFT_LDAP_URI = env_str("WEFT_LDAP_URI", "")
WEFT_LDAP_START_TLS = env_bool("WEFT_LDAP_START_TLS", False)
WEFT_LDAP_BIND_DN = env_str("WEFT_LDAP_BIND_DN", "")
WEFT_LDAP_BIND_PASSWORD = env_str("WEFT_LDAP_BIND_PASSWORD", "")
WEFT_LDAP_USER_BASE = env_str("WEFT_LDAP_USER_BASE", "")
WEFT_LDAP_USER_FILTER = env_str("WEFT_LDAP_USER_FILTER", "(uid=%(user)s)")
WEFT_LDAP_GROUP_BASE = env_str("WEFT_LDAP_GROUP_BASE", "")
WEFT_LDAP_GROUP_TYPE = env_choice(
    "WEFT_LDAP_GROUP_TYPE",
    "groupofnames",
    (
        "groupofnames",
        "nestedgroupofnames",
        "groupofuniquenames",
        "posixgroup",
        "activedirectory",
        "nestedactivedirectory",
    ),
)
WEFT_LDAP_TIMEOUT_S = env_float("WEFT_LDAP_TIMEOUT_S", 5.0, positive=True)
WEFT_LDAP_DENY_GROUP = env_str("WEFT_LDAP_DENY_GROUP", "")
#: Directory groups → Weft roles, ``role=group DN`` items separated by ``;`` (a role may repeat:
#: ``admin=cn=weft-admins,ou=groups,dc=example,dc=org; operator=cn=noc,ou=groups,dc=example,dc=org``);
#: the highest role wins; in none of them, no sign-in.
WEFT_LDAP_ROLE_GROUPS = env_pairs("WEFT_LDAP_ROLE_GROUPS", keys=("viewer", "operator", "admin"))
#: Directory groups → tenant members, ``tenant=group DN`` (a viewer) or ``tenant:operator=group DN``;
#: tenants named here have exactly the members their groups give (others are left as set in Weft).
WEFT_LDAP_TENANT_GROUPS = env_pairs(
    "WEFT_LDAP_TENANT_GROUPS", key_pattern=r"[^:\s][^:]{0,63}(:(viewer|operator))?"
)
#: OpenID Connect: the provider's issuer URL (its discovery document is read at sign-in), this
#: client's id and secret at the provider, the name on the "Sign in with ..." button, the scopes
#: asked, the claim that is the user name and the one that lists groups, the ID token's signing
#: algorithm, the seconds a request to the provider may take, and TLS certificate checks.
WEFT_OIDC_ISSUER = env_str("WEFT_OIDC_ISSUER", "")
WEFT_OIDC_CLIENT_ID = env_str("WEFT_OIDC_CLIENT_ID", "")
WEFT_OIDC_CLIENT_SECRET = env_str("WEFT_OIDC_CLIENT_SECRET", "")
WEFT_OIDC_PROVIDER_NAME = env_str("WEFT_OIDC_PROVIDER_NAME", "single sign-on")[:64]
WEFT_OIDC_SCOPES = env_str("WEFT_OIDC_SCOPES", "openid email profile")
WEFT_OIDC_USERNAME_CLAIM = env_str("WEFT_OIDC_USERNAME_CLAIM", "preferred_username")
WEFT_OIDC_GROUPS_CLAIM = env_str("WEFT_OIDC_GROUPS_CLAIM", "groups")
WEFT_OIDC_SIGN_ALGO = env_choice("WEFT_OIDC_SIGN_ALGO", "rs256", ("rs256", "es256", "hs256"))
WEFT_OIDC_TIMEOUT_S = env_float("WEFT_OIDC_TIMEOUT_S", 10.0, positive=True)
WEFT_OIDC_VERIFY_TLS = env_bool("WEFT_OIDC_VERIFY_TLS", True)
#: Claim values (the groups claim) → roles and tenants, as WEFT_LDAP_ROLE_GROUPS / _TENANT_GROUPS.
WEFT_OIDC_ROLE_GROUPS = env_pairs("WEFT_OIDC_ROLE_GROUPS", keys=("viewer", "operator", "admin"))
WEFT_OIDC_TENANT_GROUPS = env_pairs(
    "WEFT_OIDC_TENANT_GROUPS", key_pattern=r"[^:\s][^:]{0,63}(:(viewer|operator))?"
)
if WEFT_LDAP_URI:
    globals().update(
        ldap_auth_settings(
            uri=WEFT_LDAP_URI,
            user_base=WEFT_LDAP_USER_BASE,
            user_filter=WEFT_LDAP_USER_FILTER,
            group_base=WEFT_LDAP_GROUP_BASE,
            group_type=WEFT_LDAP_GROUP_TYPE,
            role_groups=WEFT_LDAP_ROLE_GROUPS,
            bind_dn=WEFT_LDAP_BIND_DN,
            bind_password=WEFT_LDAP_BIND_PASSWORD,
            start_tls=WEFT_LDAP_START_TLS,
            deny_group=WEFT_LDAP_DENY_GROUP,
            timeout_s=WEFT_LDAP_TIMEOUT_S,
        )
    )
# mozilla-django-oidc's settings exist in any case (empty client: the pages answer 404)
OIDC_RP_CLIENT_ID = OIDC_RP_CLIENT_SECRET = ""
OIDC_RP_SIGN_ALGO = "RS256"
if WEFT_OIDC_ISSUER:
    if not WEFT_OIDC_ISSUER.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"WEFT_OIDC_ISSUER={WEFT_OIDC_ISSUER!r} is not an http(s) URL")
    if not WEFT_OIDC_ROLE_GROUPS:
        raise ImproperlyConfigured(
            "WEFT_OIDC_ISSUER is set: set WEFT_OIDC_ROLE_GROUPS too (README 'Configuration')"
        )
    globals().update(
        oidc_auth_settings(
            client_id=WEFT_OIDC_CLIENT_ID,
            client_secret=WEFT_OIDC_CLIENT_SECRET,
            sign_algo=WEFT_OIDC_SIGN_ALGO,
            scopes=WEFT_OIDC_SCOPES,
            timeout_s=WEFT_OIDC_TIMEOUT_S,
            verify_tls=WEFT_OIDC_VERIFY_TLS,
        )
    )
AUTHENTICATION_BACKENDS = authentication_backends(ldap=bool(WEFT_LDAP_URI), oidc=bool(WEFT_OIDC_ISSUER))
# Token first: DRF answers an unauthenticated API request with the first class's challenge, so a
# missing, bad or expired token is 401 with WWW-Authenticate (not 403).
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = [
    "accounts.authentication.ApiTokenAuthentication",
    "rest_framework.authentication.SessionAuthentication",
]
REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"] = [
    "rest_framework.renderers.JSONRenderer",
    "core.content_security.BrowsableAPIRenderer",
]
#: Sign-in lock-out: failures of one user name from one client address before that pair's password
#: sign-in is refused, and minutes without a failure before it is allowed again. The pair, not the
#: address alone (issue 22): failures from a shared address (a NAT, the host of a UFM client) lock
#: that user there, not every user of the address; integrations use API tokens, never locked.
WEFT_LOGIN_FAILURE_LIMIT = env_int("WEFT_LOGIN_FAILURE_LIMIT", 5, min_value=1)
WEFT_LOGIN_COOLOFF_MIN = env_float("WEFT_LOGIN_COOLOFF_MIN", 15.0, positive=True)
AXES_FAILURE_LIMIT = WEFT_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=WEFT_LOGIN_COOLOFF_MIN)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "accounts.login_throttle.client_ip"
AXES_USERNAME_CALLABLE = "accounts.login_throttle.client_username"  # bounded, no NUL
AXES_LOCKOUT_CALLABLE = "accounts.login_throttle.lockout_response"
AXES_DISABLE_ACCESS_LOG = True  # successful sign-ins are in the audit log (user.login)
AXES_VERBOSE = False  # no start-up banner; failures are still logged (axes, weft.auth)
#: API token lifetime in days for new tokens; 0: tokens do not expire.
WEFT_TOKEN_TTL_DAYS = env_float("WEFT_TOKEN_TTL_DAYS", 0.0, min_value=0)
# Scripts only from this origin or with the response's nonce, no inline style, nothing framed;
# third-party pages (API docs, browsable API) relax style-src (core.content_security).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [CSP_SELF],
        "script-src": [CSP_SELF, CSP_NONCE],
        "style-src": [CSP_SELF],
        "img-src": [CSP_SELF],
        "font-src": [CSP_SELF],
        "connect-src": [CSP_SELF],
        "object-src": [CSP_NONE],
        "base-uri": [CSP_SELF],
        "form-action": [CSP_SELF],
        "frame-ancestors": [CSP_NONE],
    }
}
# --- end of the accounts and browser security block -----------------------------------------------

# Celery: the beat schedule lives here (STYLE.md). In embedded mode weft.inprocess runs it.
CELERY_BROKER_URL = REDIS_URL or "memory://"
#: results are kept only for the tasks that declare ``ignore_result=False`` (a port action the API
#: waits for on a site's worker: ``fabric.tasks.port_action_task``)
CELERY_RESULT_BACKEND = REDIS_URL or None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
#: Run ``task.delay()`` at once in the caller (tests against PostgreSQL/Redis, one-shot scripts).
CELERY_TASK_ALWAYS_EAGER = env_bool("WEFT_CELERY_EAGER", False)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Fabric I/O and control work in separate queues (weft.queues): a hung fabric never delays the
# scheduler, the watchdogs or the alarms. Declared here so that a worker without -Q takes both.
CELERY_TASK_QUEUES = {"control": {}, "fabric": {}}
CELERY_TASK_DEFAULT_QUEUE = "control"
CELERY_TASK_ROUTES = ("weft.queues.route_task",)
CELERY_TIMEZONE = TIME_ZONE
#: Beat periods (seconds): live discovery, counter sweep, history rollup, SM watch, health report.
WEFT_DISCOVERY_INTERVAL_S = env_float("WEFT_DISCOVERY_INTERVAL_S", 300.0, positive=True)
WEFT_POLL_INTERVAL_S = env_float("WEFT_POLL_INTERVAL_S", 10.0, positive=True)
WEFT_ROLLUP_INTERVAL_S = env_float("WEFT_ROLLUP_INTERVAL_S", 60.0, positive=True)
WEFT_SM_WATCH_INTERVAL_S = env_float("WEFT_SM_WATCH_INTERVAL_S", 30.0, positive=True)
#: the partitions reconcile (fabric.tasks.reconcile_partitions_task)
WEFT_PARTITIONS_RECONCILE_INTERVAL_S = env_float("WEFT_PARTITIONS_RECONCILE_INTERVAL_S", 300.0, positive=True)
WEFT_HEALTH_INTERVAL_S = env_float("WEFT_HEALTH_INTERVAL_S", 86400.0, positive=True)
# Routes (routing app): the switches' forwarding tables are read on this period, and this long
# after a discovery commit or an SM hand-over (the SM re-routes in its own sweep after the change).
WEFT_ROUTING_INTERVAL_S = env_float("WEFT_ROUTING_INTERVAL_S", 300.0, positive=True)
WEFT_ROUTING_SETTLE_S = env_float("WEFT_ROUTING_SETTLE_S", 5.0, min_value=0.0)
#: how often allocation leases are checked (pools.tasks.expire_leases_task), seconds
WEFT_LEASE_CHECK_INTERVAL_S = env_float("WEFT_LEASE_CHECK_INTERVAL_S", 30.0, positive=True)
#: Job queue (scheduler.services.queue): the periodic pass (beat; passes also run on submit, on
#: release and on topology or alarm changes), the time limit assumed for jobs without one (the
#: backfill's estimates; not enforced) and the fair-share usage window (seconds), and the
#: decisions kept per job.
WEFT_SCHEDULER_PASS_INTERVAL_S = env_float("WEFT_SCHEDULER_PASS_INTERVAL_S", 30.0, positive=True)
WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S = env_float("WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S", 86400.0, positive=True)
WEFT_SCHEDULER_FAIRSHARE_WINDOW_S = env_float("WEFT_SCHEDULER_FAIRSHARE_WINDOW_S", 7 * 86400.0, positive=True)
WEFT_SCHEDULER_DECISION_HISTORY = env_int("WEFT_SCHEDULER_DECISION_HISTORY", 20, min_value=1)
#: how long a job's idempotency key (the ``Idempotency-Key`` of a submit, the submit page's
#: one-time token) is kept, seconds from the job's submit: a replay within it gets the first job;
#: after it the key is free again (``events.tasks.prune_task`` clears the stored keys).
WEFT_IDEMPOTENCY_TTL_S = env_float("WEFT_IDEMPOTENCY_TTL_S", 86400.0, positive=True)
#: the rebalancing worker (scheduler.services.rebalance: reclaim, defragmenting moves, congestion
#: reports), seconds between runs by beat
WEFT_SCHEDULER_REBALANCE_INTERVAL_S = env_float("WEFT_SCHEDULER_REBALANCE_INTERVAL_S", 300.0, positive=True)
#: path-aware placement (scheduler.services.state.path_costs): a directed port is hot when its
#: congestion index is above the ``port.congestion`` policy's threshold or its utilisation (0..1,
#: telemetry's latest sweep) above this
WEFT_PLACEMENT_HOT_UTILISATION = env_float("WEFT_PLACEMENT_HOT_UTILISATION", 0.8, positive=True)
#: Outbound webhooks (``outbound.services``: a job's runner, a tenant): seconds an attempt may
#: take, attempts before giving up, the first back-off (doubled after each failure, at most an
#: hour) and how often the retry sweep runs (beat).
WEFT_WEBHOOK_TIMEOUT_S = env_float("WEFT_WEBHOOK_TIMEOUT_S", 5.0, positive=True)
WEFT_WEBHOOK_MAX_ATTEMPTS = env_int("WEFT_WEBHOOK_MAX_ATTEMPTS", 6, min_value=1)
WEFT_WEBHOOK_BACKOFF_S = env_float("WEFT_WEBHOOK_BACKOFF_S", 10.0, positive=True)
WEFT_WEBHOOK_RETRY_INTERVAL_S = env_float("WEFT_WEBHOOK_RETRY_INTERVAL_S", 15.0, positive=True)
#: Alert targets (events.alerting, README "Alerting"): Alertmanager's firing alerts end this × 4
#: seconds after each post and are re-posted every minute; syslog's facility (16 = local0), the
#: HOSTNAME field (empty: this host's name) and the SD-ID of the STRUCTURED-DATA (name@enterprise
#: number; 32473 is the documentation example number of RFC 5612, set your own).
WEFT_WEBHOOK_RETENTION_DAYS = env_float("WEFT_WEBHOOK_RETENTION_DAYS", 30.0, min_value=0)
WEFT_ALERTMANAGER_RESEND_S = env_float("WEFT_ALERTMANAGER_RESEND_S", 60.0, positive=True)
WEFT_SYSLOG_FACILITY = env_int("WEFT_SYSLOG_FACILITY", 16, min_value=0)
WEFT_SYSLOG_HOSTNAME = env_str("WEFT_SYSLOG_HOSTNAME", "")
WEFT_SYSLOG_SD_ID = env_str("WEFT_SYSLOG_SD_ID", "weft@32473")
# checked here: a bad one made every syslog message of the alarm engine raise (outbound.syslog)
if not 0 <= WEFT_SYSLOG_FACILITY <= 23:
    raise ImproperlyConfigured(
        f"WEFT_SYSLOG_FACILITY={WEFT_SYSLOG_FACILITY}: a facility 0-23 (RFC 5424 §6.2.1)"
    )
if WEFT_SYSLOG_SD_ID and not re.fullmatch(
    r"[!-~]{1,32}", WEFT_SYSLOG_SD_ID.replace("=", " ").replace("]", " ").replace('"', " ")
):
    raise ImproperlyConfigured(
        f"WEFT_SYSLOG_SD_ID={WEFT_SYSLOG_SD_ID!r}: an SD-ID is 1-32 printable ASCII characters without "
        "'=', ']', '\"' or a space (RFC 5424 §6.3.2), e.g. weft@32473"
    )

# Dead workers and hung fabrics (README "Configuration"). Task locks are leases of WEFT_LOCK_TTL_S
# renewed by their holder (core.locks): a killed worker frees them within that. A task whose pool
# process dies is put back at once (reject on worker lost) and run again once (weft.celery); one
# whose whole worker died is delivered again after WEFT_TASK_REDELIVERY_S (Redis visibility
# timeout, default 1 hour in Celery). A SIGTERM-ed worker stops its diags after
# WEFT_SHUTDOWN_GRACE_S (weft.worker). The watchdogs raise system.poller_stalled /
# system.discovery_stalled after WEFT_STALL_INTERVALS intervals (plus a run's budget) without one.
WEFT_LOCK_TTL_S = env_float("WEFT_LOCK_TTL_S", 10.0, min_value=1.0)
WEFT_TASK_REDELIVERY_S = env_float("WEFT_TASK_REDELIVERY_S", 300.0)
WEFT_SHUTDOWN_GRACE_S = env_float("WEFT_SHUTDOWN_GRACE_S", 10.0, min_value=0.0)
WEFT_STALL_INTERVALS = env_int("WEFT_STALL_INTERVALS", 3, min_value=1)
WEFT_WATCHDOG_INTERVAL_S = env_float("WEFT_WATCHDOG_INTERVAL_S", 30.0)
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": WEFT_TASK_REDELIVERY_S}
#: celery beat's state file: in the data folder (made here if missing), not in the current directory.
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
try:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
except OSError:  # read-only or not ours: beat says so when it opens the file
    pass

if EMAIL_URL := env_str("EMAIL_URL", "console://"):
    _email = parse_email_url(EMAIL_URL)
    EMAIL_BACKEND = _email.backend
    EMAIL_HOST, EMAIL_PORT = _email.host, _email.port
    EMAIL_HOST_USER, EMAIL_HOST_PASSWORD = _email.user, _email.password
    EMAIL_USE_TLS, EMAIL_USE_SSL = _email.use_tls, _email.use_ssl
    EMAIL_FILE_PATH = _email.file_path or str(DATA_DIR / "mail")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "weft@localhost")
#: Absolute base URL used in alert emails to link to alarm pages.
WEFT_BASE_URL = env_str("WEFT_BASE_URL", "http://127.0.0.1:8000")
#: Alert mail: default recipients (policies without their own), storm and rate limits. With the
#: console mail backend (the default) alerts go to a placeholder so the demo shows them.
WEFT_ALERT_EMAILS = env_list(
    "WEFT_ALERT_EMAILS", ["oncall@localhost"] if EMAIL_URL.startswith("console:") else []
)
#: Counter alarms' clear hysteresis: an open error-counter, link-downed, congestion or saturated
#: counters alarm clears only after this many sweeps in a row without the condition (events.rules.counters)
WEFT_COUNTER_CLEAR_SWEEPS = env_int("WEFT_COUNTER_CLEAR_SWEEPS", 3, min_value=1)
#: Switch health (fabric.services.switchhealth): the ibswinfo.sh script ("" = not installed: fabrics
#: whose switch_info_tool is "ibswinfo" say so on their switch pages), readings kept per switch,
#: and the temperature alarm's limit for switches that print no warning threshold of their own
WEFT_IBSWINFO = env_str("WEFT_IBSWINFO", "")
WEFT_SWITCH_HEALTH_KEEP = env_int("WEFT_SWITCH_HEALTH_KEEP", 288, min_value=1)
WEFT_SWITCH_TEMP_MAX_C = env_int("WEFT_SWITCH_TEMP_MAX_C", 80, min_value=20)
WEFT_SWITCH_HEALTH_INTERVAL_S = env_int("WEFT_SWITCH_HEALTH_INTERVAL_S", 300, min_value=30)
#: Cables and transceivers (fabric.services.cables): the programs (empty: looked up on PATH and in
#: the sbin directories; absent: fabrics whose cable_info_tool names them say so on their port
#: pages), how long one run may take, readings kept per port, how often they are read, and the
#: alarm limits for modules that report no threshold of their own
WEFT_MLXLINK = env_str("WEFT_MLXLINK", "")
WEFT_IBDIAGNET = env_str("WEFT_IBDIAGNET", "")
WEFT_IBDIAGNET_TIMEOUT_S = env_int("WEFT_IBDIAGNET_TIMEOUT_S", 900, min_value=30)
WEFT_CABLE_INFO_KEEP = env_int("WEFT_CABLE_INFO_KEEP", 48, min_value=1)
WEFT_CABLE_INFO_INTERVAL_S = env_int("WEFT_CABLE_INFO_INTERVAL_S", 3600, min_value=60)
WEFT_CABLE_TEMP_MAX_C = env_int("WEFT_CABLE_TEMP_MAX_C", 75, min_value=20)
WEFT_CABLE_RX_POWER_MIN_DBM = env_float("WEFT_CABLE_RX_POWER_MIN_DBM", -12.0)
WEFT_MAIL_STORM_THRESHOLD = env_int("WEFT_MAIL_STORM_THRESHOLD", 5, min_value=1)
WEFT_MAIL_RATE_LIMIT = env_int("WEFT_MAIL_RATE_LIMIT", 10, min_value=0)
# Critical alarms have their own budget: lower-severity mail never delays them (events.notify).
WEFT_MAIL_CRITICAL_RATE_LIMIT = env_int("WEFT_MAIL_CRITICAL_RATE_LIMIT", 10, min_value=0)
WEFT_MAIL_RATE_WINDOW_S = env_float("WEFT_MAIL_RATE_WINDOW_S", 600.0, positive=True)

#: Retention (days) of what ``events.tasks.prune_task`` deletes daily: evaluated events, cleared
#: alarms, sent/failed mail outbox rows, health reports. Open alarms and pending mail are kept.
WEFT_EVENT_RETENTION_DAYS = env_float("WEFT_EVENT_RETENTION_DAYS", 365.0, min_value=0)
WEFT_ALARM_RETENTION_DAYS = env_float("WEFT_ALARM_RETENTION_DAYS", 365.0, min_value=0)
WEFT_NOTIFICATION_RETENTION_DAYS = env_float("WEFT_NOTIFICATION_RETENTION_DAYS", 30.0, min_value=0)
WEFT_HEALTH_RETENTION_DAYS = env_float("WEFT_HEALTH_RETENTION_DAYS", 90.0, min_value=0)
#: Health report: raw error-counter limits that override ``events.health.ERROR_THRESHOLDS``, from
#: ``counter=value,...`` (e.g. ``symbol_errors=50,link_downed=2``); counters as in PortCounters:
#: the error counters of ``telemetry.semantics.ERROR_COUNTERS``, written again here because the
#: settings import no app (the same names: system check ``telemetry.E002``).
HEALTH_ERROR_COUNTERS = (
    "symbol_errors",
    "link_error_recovery",
    "link_downed",
    "rcv_errors",
    "rcv_remote_phys_errors",
    "xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "vl15_dropped",
    "xmit_constraint_errors",
    "rcv_constraint_errors",
)
WEFT_HEALTH_ERROR_THRESHOLDS = env_int_map("WEFT_HEALTH_ERROR_THRESHOLDS", {}, keys=HEALTH_ERROR_COUNTERS)

#: Tokens (comma-separated) accepted on /metrics as "Authorization: Bearer <token>".
WEFT_METRICS_TOKENS = env_list("WEFT_METRICS_TOKENS", [])
#: Client addresses allowed to read /metrics without a token.
WEFT_METRICS_ALLOW = env_list("WEFT_METRICS_ALLOW", ["127.0.0.1", "::1"])
#: The IEEE OUI list and the PCI ID list Weft names vendors and devices from (Debian's ``ieee-data``
#: and ``pci.ids`` packages, installed by bin/setup); absent files mean hex IDs (``fabric.vendors``).
WEFT_OUI_PATH = env_str("WEFT_OUI_PATH", "/usr/share/ieee-data/oui.txt")
WEFT_PCI_IDS_PATH = env_str("WEFT_PCI_IDS_PATH", "/usr/share/misc/pci.ids")
#: Largest topology file (bytes, uncompressed) the import API and import_topology accept.
WEFT_IMPORT_MAX_BYTES = env_int("WEFT_IMPORT_MAX_BYTES", 256 * 1024 * 1024, min_value=1)
#: Largest host-agent report body (bytes) POST /api/pools/agent/ reads: a DGX's nvidia-smi -q -x
#: is 100-300 KB, so the default leaves room; above it the answer is 413 (pools.api.views).
WEFT_AGENT_MAX_BODY_BYTES = env_int("WEFT_AGENT_MAX_BODY_BYTES", 4 * 1024 * 1024, min_value=1024)
#: The most GPUs one host report may list, and the most GPU rows (present and missing) one host
#: keeps (pools.services.inventory.check_bounds): a DGX/HGX has 8, the largest servers 16-20.
WEFT_GPUS_PER_REPORT_MAX = env_int("WEFT_GPUS_PER_REPORT_MAX", 64, min_value=1)
WEFT_GPUS_PER_HOST_MAX = env_int("WEFT_GPUS_PER_HOST_MAX", 256, min_value=1)
#: A host agent's token with no host bound is bound to the host of its first report (off: refused
#: until an Admin binds it). See pools.services.agents.
WEFT_AGENT_BIND_ON_FIRST_REPORT = env_bool("WEFT_AGENT_BIND_ON_FIRST_REPORT", True)
#: an import that would remove more than this share of the stored nodes or links needs ``replace``
WEFT_IMPORT_MAX_REMOVE_SHARE = env_float("WEFT_IMPORT_MAX_REMOVE_SHARE", 0.10, min_value=0.0)
#: Directories a fabric's node-name map path may lie in (a map path elsewhere is refused: the
#: setting is an Admin's, and a bad map's errors quote its lines).
WEFT_NODE_NAME_MAP_DIRS = env_list(
    "WEFT_NODE_NAME_MAP_DIRS", ["/etc/opensm", "/etc/infiniband-diags", "/etc/rdma", "/etc/weft"]
)
#: Ceiling on the REST API's ?limit= (page size).
WEFT_API_MAX_LIMIT = env_int("WEFT_API_MAX_LIMIT", 10000, min_value=1)
#: Default timeout (seconds) for one run of an infiniband-diags tool.
WEFT_TOOL_TIMEOUT_S = env_float("WEFT_TOOL_TIMEOUT_S", 120.0, positive=True)
#: OpenSM partitions (fabric.services.partitions): the partitions file written for fabrics that set
#: none of their own (Fabric.partitions_path), the OpenSM pid file to SIGHUP (Fabric.sm_pid_file),
#: seconds to wait for OpenSM's re-sweep and the ports' PKey tables, ports verified per apply.
WEFT_PARTITIONS_PATH = env_str("WEFT_PARTITIONS_PATH", "")
WEFT_SM_PID_FILE = env_str("WEFT_SM_PID_FILE", "")
WEFT_PARTITIONS_VERIFY_TIMEOUT_S = env_float("WEFT_PARTITIONS_VERIFY_TIMEOUT_S", 60.0, positive=True)
WEFT_PARTITIONS_VERIFY_SAMPLE = env_int("WEFT_PARTITIONS_VERIFY_SAMPLE", 8, min_value=1)
#: the partitions reconcile (fabric.services.partitions.reconcile, beat every
#: WEFT_PARTITIONS_RECONCILE_INTERVAL_S): member (and non-member) ports read per partition and run
#: (every member within ceil(members / sample) runs), and how long a change may stay pending
#: before an alarm.
WEFT_PARTITIONS_RECONCILE_SAMPLE = env_int("WEFT_PARTITIONS_RECONCILE_SAMPLE", 16, min_value=1)
WEFT_PARTITIONS_PENDING_ALARM_S = env_float("WEFT_PARTITIONS_PENDING_ALARM_S", 300.0, positive=True)
#: The fabric the UFM-compatible API (``/ufmRest/``...) serves, by name; empty: the only fabric
#: there is (with several, the API answers 503 until this names one).
WEFT_UFM_FABRIC = env_str("WEFT_UFM_FABRIC", "")
#: OpenSM's options file, read for the keys ``GET /ufmRest/app/smconf`` shows an Admin (m_key,
#: sm_key, sa_key, m_key_per_port); empty or unreadable: OpenSM's defaults.
WEFT_OPENSM_CONF = env_str("WEFT_OPENSM_CONF", "")
#: Parallel perfquery processes per sweep.
WEFT_POLL_PARALLELISM = env_int("WEFT_POLL_PARALLELISM", 8, min_value=1)
#: Counter sweeps (telemetry): collector ("mad" pipelined PerfMgt MADs, or "perfquery"), MADs in
#: flight, poller processes, a serving poller kept between sweeps, switch groups per fabric (one
#: Celery task each), PortXmitWait tick assumed by the congestion index.
WEFT_POLL_MECHANISM = env_choice("WEFT_POLL_MECHANISM", "mad", ("mad", "perfquery"))
WEFT_POLL_WINDOW = env_int("WEFT_POLL_WINDOW", 64, min_value=1)
WEFT_POLL_PROCESSES = env_int("WEFT_POLL_PROCESSES", 1, min_value=1)
WEFT_POLL_PERSISTENT = env_bool("WEFT_POLL_PERSISTENT", True)
WEFT_POLL_GROUPS = env_int("WEFT_POLL_GROUPS", 1, min_value=1)
#: Publish a committed sweep (``sweep_committed``: heatmap delta, counter rules) from a per-process
#: thread, in sweep order, after the sweep returns (``telemetry.services.publisher``): off the
#: sweep's path. Default on with PostgreSQL + Redis; embedded (SQLite) publishes inline.
WEFT_SWEEP_PUBLISH_ASYNC = env_bool("WEFT_SWEEP_PUBLISH_ASYNC", not EMBEDDED)
#: PortXmitWait tick (ns); default ``telemetry.semantics.DEFAULT_TICK_NS`` (the same number:
#: ``telemetry.checks``)
WEFT_XMIT_WAIT_TICK_NS = env_float("WEFT_XMIT_WAIT_TICK_NS", 1000.0, positive=True)
#: Per-MAD timeout (seconds) of the MAD poller, before it resends. 1.0 s: the value sweeps have
#: always used (this setting's default and the poller's ``--timeout``) and libibmad's own default
#: (``MAD_DEF_TIMEOUT_MS`` 1000 in infiniband/mad.h), i.e. what perfquery waits. The other value,
#: 0.5 s, was only ``run_madpoll``'s keyword default, taken by no sweep: too short on a loaded SM
#: host, where a late answer becomes a timeout and marks a healthy port stale. The number lives in
#: ``madpoll.DEFAULT_TIMEOUT_S`` because the poller also runs as a child without Django; settings
#: import no app module, so it is written again here (the same number: ``telemetry.checks``).
WEFT_MAD_TIMEOUT_S = env_float("WEFT_MAD_TIMEOUT_S", 1.0, positive=True)
#: SM notices (``fabric.services.notices``): run the listeners inside ``manage.py serve`` (embedded;
#: production runs ``manage.py listen_notices``), how often the listeners' supervisor looks for
#: new or removed live fabrics, and the port-state fallback that reads PortInfo of switch ports
#: when notices do not arrive ("auto": while no subscription is confirmed, "always", "off") and
#: its period (default: the counter sweep's).
WEFT_NOTICES = env_bool("WEFT_NOTICES", True)
#: Leadership leases of the singleton roles (beat, the notice listener of each fabric, the SNMP
#: trap receiver; ``core.leases``): a leader renews every third of this; a standby takes over at
#: most this long (plus its poll, a fifth of it) after the leader died; a role without a live
#: leader for this long again raises ``system.role_down``.
WEFT_LEASE_TTL_S = env_float("WEFT_LEASE_TTL_S", 6.0, positive=True)
#: Collector sites (``core.sites``, issue 25 §2): refuse work for a fabric whose site has no live
#: worker (a 503) and skip it in the periodic fan-outs. On when workers are separate processes;
#: the embedded deployment's in-process worker and eager runs serve every site themselves.
WEFT_SITE_CHECK = env_bool("WEFT_SITE_CHECK", not EMBEDDED and not CELERY_TASK_ALWAYS_EAGER)
WEFT_NOTICE_RESCAN_S = env_float("WEFT_NOTICE_RESCAN_S", 10.0, positive=True)
WEFT_PORT_STATE_FALLBACK = env_choice("WEFT_PORT_STATE_FALLBACK", "auto", ("auto", "always", "off"))
WEFT_PORT_STATE_INTERVAL_S = env_float("WEFT_PORT_STATE_INTERVAL_S", WEFT_POLL_INTERVAL_S, positive=True)
#: With notices confirmed, the same port-state read as a safety net for a lost Report (seconds).
WEFT_PORT_STATE_VERIFY_S = env_float("WEFT_PORT_STATE_VERIFY_S", 60.0, positive=True)
#: Counter history retention (hours) per resolution, and of Sweep rows.
WEFT_HISTORY_RAW_HOURS = env_float("WEFT_HISTORY_RAW_HOURS", 6.0, min_value=0)
WEFT_HISTORY_MINUTE_HOURS = env_float("WEFT_HISTORY_MINUTE_HOURS", 168.0, min_value=0)
WEFT_HISTORY_HOUR_HOURS = env_float("WEFT_HISTORY_HOUR_HOURS", 8760.0, min_value=0)
WEFT_SWEEP_RETENTION_HOURS = env_float("WEFT_SWEEP_RETENTION_HOURS", 168.0, min_value=0)

#: Ethernet devices over SNMP (devices app): how often beat looks for devices due a poll (each
#: device has its own poll_interval_s), SNMP requests' concurrency (devices polled at once per
#: task), device groups (one Celery task each, spread over workers like WEFT_POLL_GROUPS), the
#: interface/entity inventory period, the trap listener's address, and the credentials key(s).
WEFT_SNMP_TICK_S = env_float("WEFT_SNMP_TICK_S", 10.0, positive=True)
WEFT_SNMP_CONCURRENCY = env_int("WEFT_SNMP_CONCURRENCY", 64, min_value=1)
WEFT_SNMP_GROUPS = env_int("WEFT_SNMP_GROUPS", 1, min_value=1)
WEFT_SNMP_INVENTORY_S = env_float("WEFT_SNMP_INVENTORY_S", 3600.0, positive=True)
#: how often a device's ENTITY-SENSOR-MIB readings are read (0: every poll); the counters and
#: states are read every poll. Sensors are a fifth of a poll's varbinds and move slowly (LibreNMS
#: reads them every 300 s cycle)
WEFT_SNMP_SENSORS_S = env_float("WEFT_SNMP_SENSORS_S", 300.0, min_value=0.0)
WEFT_SNMP_TRAP_LISTEN = env_str("WEFT_SNMP_TRAP_LISTEN", "0.0.0.0:162")
#: the port ``manage.py serve`` (embedded deployment, the demo) receives SNMP traps on, on the host
#: of WEFT_SNMP_TRAP_LISTEN; 0 (the default): no trap receiver in serve (production runs
#: ``manage.py snmp_traps``). A port below 1024 needs root or CAP_NET_BIND_SERVICE.
WEFT_SNMP_TRAP_PORT = env_int("WEFT_SNMP_TRAP_PORT", 0, min_value=0)
#: Fernet keys that encrypt device credentials at rest (devices.crypto): the first encrypts, all
#: decrypt (rotation); unset: one derived from SECRET_KEY.
WEFT_CREDENTIALS_KEYS = env_fernet_keys("WEFT_CREDENTIALS_KEY")

# Celery beat: every periodic task, in one place (the intervals are the settings above).
CELERY_BEAT_SCHEDULE = {
    "discover-all-fabrics": {
        "task": "fabric.tasks.discover_all_task",
        "schedule": timedelta(seconds=WEFT_DISCOVERY_INTERVAL_S),
    },
    "poll-all-fabrics": {
        "task": "telemetry.tasks.poll_all_task",
        "schedule": timedelta(seconds=WEFT_POLL_INTERVAL_S),
    },
    "rollup-counters": {
        "task": "telemetry.tasks.rollup_task",
        "schedule": timedelta(seconds=WEFT_ROLLUP_INTERVAL_S),
    },
    "sm-watch": {
        "task": "fabric.tasks.sm_watch_task",
        "schedule": timedelta(seconds=WEFT_SM_WATCH_INTERVAL_S),
    },
    "reconcile-partitions": {
        "task": "fabric.tasks.reconcile_partitions_task",
        "schedule": timedelta(seconds=WEFT_PARTITIONS_RECONCILE_INTERVAL_S),
    },
    "webhook-retries": {
        "task": "outbound.tasks.retry_due_task",
        "schedule": timedelta(seconds=WEFT_WEBHOOK_RETRY_INTERVAL_S),
    },
    "webhook-prune": {"task": "outbound.tasks.prune_task", "schedule": timedelta(days=1)},
    "alarm-mail-flush": {"task": "events.tasks.flush_notifications_task", "schedule": timedelta(seconds=60)},
    "alarm-mail-digest": {"task": "events.tasks.daily_digest_task", "schedule": timedelta(days=1)},
    "events-prune": {"task": "events.tasks.prune_task", "schedule": timedelta(days=1)},
    "health-report": {
        "task": "events.tasks.health_report_task",
        "schedule": timedelta(seconds=WEFT_HEALTH_INTERVAL_S),
    },
    "allocation-leases": {
        "task": "pools.tasks.expire_leases_task",
        "schedule": timedelta(seconds=WEFT_LEASE_CHECK_INTERVAL_S),
    },
    "scheduler-pass": {
        "task": "scheduler.tasks.run_pass_task",
        "schedule": timedelta(seconds=WEFT_SCHEDULER_PASS_INTERVAL_S),
    },
    "scheduler-rebalance": {
        "task": "scheduler.tasks.rebalance_task",
        "schedule": timedelta(seconds=WEFT_SCHEDULER_REBALANCE_INTERVAL_S),
    },
    "switch-health": {
        "task": "fabric.tasks.collect_switch_health_task",
        "schedule": timedelta(seconds=WEFT_SWITCH_HEALTH_INTERVAL_S),
    },
    "cable-info": {
        "task": "fabric.tasks.collect_cable_info_task",
        "schedule": timedelta(seconds=WEFT_CABLE_INFO_INTERVAL_S),
    },
    "routing-collect": {
        "task": "routing.tasks.collect_all_task",
        "schedule": timedelta(seconds=WEFT_ROUTING_INTERVAL_S),
    },
    "poller-watchdog": {
        "task": "telemetry.tasks.poller_watchdog_task",
        "schedule": timedelta(seconds=WEFT_WATCHDOG_INTERVAL_S),
    },
    "role-watchdog": {
        "task": "events.tasks.role_watch_task",
        "schedule": timedelta(seconds=WEFT_WATCHDOG_INTERVAL_S),
    },
    "discovery-watchdog": {
        "task": "fabric.tasks.discovery_watchdog_task",
        "schedule": timedelta(seconds=WEFT_WATCHDOG_INTERVAL_S),
    },
    "poll-devices": {
        "task": "devices.tasks.poll_devices_task",
        "schedule": timedelta(seconds=WEFT_SNMP_TICK_S),
    },
    "rollup-devices": {
        "task": "devices.tasks.rollup_history_task",
        "schedule": timedelta(seconds=WEFT_ROLLUP_INTERVAL_S),
    },
}

if PRODUCTION:
    SESSION_COOKIE_SECURE = env_bool("WEFT_SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = env_bool("WEFT_SECURE_COOKIES", True)
    SECURE_SSL_REDIRECT = env_bool("WEFT_SSL_REDIRECT", True)
    # Prometheus on the same host scrapes http://127.0.0.1:PORT/metrics without the proxy: a redirect
    # to https would fail it (WEFT_METRICS_ALLOW). A remote scraper goes through the TLS proxy anyway.
    SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
    SECURE_HSTS_SECONDS = env_int("WEFT_HSTS_SECONDS", 31536000, min_value=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {
        "permission_denied": {"()": "core.logging_filters.PermissionDeniedIsNotAnError"},
        "one_line_warning": {"()": "core.logging_filters.OneLineWarning"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("WEFT_LOG_LEVEL", "INFO")},
    "loggers": {
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
        # a refused page is one INFO line, not a WARNING with a traceback (core.logging_filters)
        "django.request": {"filters": ["permission_denied"]},
        # a Host not in ALLOWED_HOSTS: one WARNING line, not an ERROR with a traceback per request
        "django.security.DisallowedHost": {"filters": ["one_line_warning"]},
        # a directory error is one WARNING line of weft.auth (accounts.ldap_auth), not also theirs
        "django_auth_ldap": {"level": "ERROR"},
    },
}
if EMBEDDED:
    # The in-process worker (serve, demo, one-shot commands) would log every task's success at INFO
    # (the demo: ~90 lines a minute, and before a command's JSON summary); failures still show.
    # A production worker keeps Celery's own task log (``celery worker -l info``).
    LOGGING["loggers"]["celery.app.trace"] = {"level": "WARNING"}

# Shared cache: Redis in production (task non-overlap locks, rate limits across workers),
# process-local memory in the embedded deployment.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
