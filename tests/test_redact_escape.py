"""Secrets never reach a report, and node text never drives a terminal."""

from __future__ import annotations

from preflight.escape import printable
from preflight.node.masking import mask_env, scrub
from preflight.redact import MASK, redact


def test_secret_named_environment_values_are_masked() -> None:
    facts = {
        "env": {
            "NCCL_DEBUG": "INFO",
            "HF_TOKEN": "hf_abcdef",
            "WANDB_API_KEY": "0123",
            "AWS_SECRET_ACCESS_KEY": "s3cr3t",
            "DB_PASSWORD": "pw",
        }
    }
    env = redact(facts)["env"]
    assert env["NCCL_DEBUG"] == "INFO"
    assert {env[k] for k in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD")} == {MASK}


def test_credentials_in_urls_are_masked_anywhere() -> None:
    facts = {"packages": {"x": "1.0"}, "notes": ["pip index https://ci:hunter2@pypi.internal/simple"]}
    text = redact(facts)["notes"][0]
    assert "hunter2" not in text
    assert text == f"pip index https://ci:{MASK}@pypi.internal/simple"


def test_what_a_node_masked_passes_the_controller_unchanged() -> None:
    """One set of rules on both sides: what the node's masking gives, the controller's keeps as is."""
    sent = scrub(
        {
            "env": {"HF_TOKEN": "hf_abcdef", "PIP_INDEX_URL": "https://ci:hunter2@pypi.internal/simple"},
            "nccl": {"conf_files": [{"settings": mask_env({"NCCL_IB_TOKEN": "t", "NCCL_DEBUG": "INFO"})}]},
            "torch": "https://tok@host/x",
        }
    )
    assert "hunter2" not in str(sent) and "hf_abcdef" not in str(sent) and "tok@" not in str(sent)
    assert redact(sent) == sent


def test_ansi_and_control_characters_are_removed() -> None:
    hostile = "gpu01\x1b[2J\x1b]0;pwned\x07\x1b[31mred\x1b[0m\x00\x08\r"
    assert printable(hostile) == "gpu01red"
    assert printable("two\nlines\ttab", keep_newlines=False) == "two lines tab"


def test_secret_names_are_matched_by_whole_words() -> None:
    from preflight.redact import is_secret_name

    assert is_secret_name("HF_TOKEN") and is_secret_name("wandb_api_key") and is_secret_name("DB-PASSWORD")
    assert not is_secret_name("NCCL_IB_PKEY")
    assert not is_secret_name("TORCH_PASSTHROUGH")
    assert not is_secret_name("CUDA_VISIBLE_DEVICES")
