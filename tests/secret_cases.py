"""One table of environment variables, secret and not: the child environment and the session log
are tested against the same rows, so the two can never disagree again."""

from __future__ import annotations

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (name, value, the text that must not survive: the value, or a URL's password)
SECRET: list[tuple[str, str, str]] = [
    ("GITHUB_TOKEN", "ghp_" + "a1B2c3D4e5" * 4, "ghp_" + "a1B2c3D4e5" * 4),
    ("MY_API_KEY", "k-1234567890", "k-1234567890"),
    ("DB_PASSWORD", "hunter2hunter2", "hunter2hunter2"),
    ("client_secret", "abcdefgh1234", "abcdefgh1234"),
    ("PGPASSWORD", "pgpass-12345", "pgpass-12345"),
    ("MYSQL_PWD", "mysqlpw-1234", "mysqlpw-1234"),
    ("NPM_CONFIG__AUTH", "bnBtOnNlY3JldHBhc3M=", "bnBtOnNlY3JldHBhc3M="),
    ("ANTHROPIC_AUTH", "anthropic-auth-value", "anthropic-auth-value"),
    ("SLACK_WEBHOOK", "https://hooks.slack.com/services/T0/B0/XXXXXXXX", "services/T0/B0/XXXXXXXX"),
    ("SMTP_PASSWD", "smtp-passwd-1", "smtp-passwd-1"),
    ("REDIS_PASS", "redis-pass-12", "redis-pass-12"),
    ("SENTRY_DSN", "https://abc123def456@o1.ingest.sentry.io/1", "abc123def456@o1"),
    ("DATABASE_URL", "postgres://app:s3cr3t-pw@db.internal:5432/app", "s3cr3t-pw"),
    ("UPSTREAM", "https://deploy:hunter22x@git.example.com/repo.git", "hunter22x"),
    ("OPENAI", "sk-proj-abcdefghijklmnopqrstuvwx", "sk-proj-abcdefghijklmnopqrstuvwx"),
    ("SLACK_BOT", "xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
    ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("CI_IDENTITY", JWT, JWT),
    ("SESSION_SIG", "q8Zr2LxV9mT4wK7pN1sYb6Hc3Fj5Ud0A", "q8Zr2LxV9mT4wK7pN1sYb6Hc3Fj5Ud0A"),
]

PLAIN: list[tuple[str, str]] = [
    ("PLAIN_SETTING", "value"),
    ("LANG_CHOICE", "C.UTF-8"),
    ("SSH_AUTH_SOCK", "/tmp/ssh-abc123/agent.4242"),
    ("GIT_ASKPASS", "/usr/bin/ksshaskpass"),
    ("DATABASE_HOST", "db.internal"),
    ("API_BASE_URL", "https://api.example.com/v1"),
    ("HTTP_PROXY_URL", "http://proxy.internal:3128"),
    ("SESSION_NAME", "work-session-for-today"),
    ("BUILD_NUMBER", "1234567"),
]
