from __future__ import annotations

import pytest

from shared.secrets import MissingSecret, expand
from shared.settings import Settings


def test_references_are_filled_from_trawl_secrets_only() -> None:
    secrets = Settings.from_env({"TRAWL_SECRET_SHOP": "s3cr3t", "DATABASE_URL": "postgresql://x"})
    assert dict(secrets.secrets) == {"TRAWL_SECRET_SHOP": "s3cr3t"}
    assert expand("Bearer ${TRAWL_SECRET_SHOP}", secrets.secrets) == "Bearer s3cr3t"
    assert expand("no reference", {}) == "no reference"


def test_other_variables_and_missing_secrets_are_refused() -> None:
    with pytest.raises(MissingSecret, match="only TRAWL_SECRET_"):
        expand("${DATABASE_URL}", {"DATABASE_URL": "postgresql://x"})
    with pytest.raises(MissingSecret, match="TRAWL_SECRET_NOPE is not set"):
        expand("Bearer ${TRAWL_SECRET_NOPE}", {})
