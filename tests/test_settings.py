"""Settings: declared once, read from the environment only when asked, documented in the README."""

import importlib.util
from pathlib import Path

import pytest

from sleuth.errors import ConfigError
from sleuth.settings import Settings

README = Path(__file__).resolve().parents[1] / "README.md"
SETTINGS_TABLE = Path(__file__).resolve().parents[1] / "scripts" / "settings_table.py"


def test_defaults_without_environment():
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.kafka_bootstrap == "127.0.0.1:19092"


def test_environment_overrides_and_parses():
    settings = Settings.from_env({"SLEUTH_KAFKA_PORT": "29092", "SLEUTH_GPUS_PER_HOST": "4", "UNRELATED": "x"})
    assert settings.kafka_port == 29092
    assert settings.gpus_per_host == 4
    assert settings.kafka_bootstrap == "127.0.0.1:29092"


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("SLEUTH_KAFKA_PORT", "kafka", "invalid literal"),
        ("SLEUTH_CLICKHOUSE_PORT", "70000", "not a TCP port"),
        ("SLEUTH_GPUS_PER_HOST", "0", "not a positive integer"),
    ],
)
def test_bad_values_fail_naming_the_variable(variable, value, why):
    with pytest.raises(ConfigError, match=rf"{variable}='{value}': .*{why}"):
        Settings.from_env({variable: value})


def _settings_table_script():
    spec = importlib.util.spec_from_file_location("settings_table", SETTINGS_TABLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_setting_is_in_the_readme():
    # The README's table is exactly what scripts/settings_table.py generates from Settings.describe(),
    # so a setting added, removed or changed without regenerating the README fails here.
    script = _settings_table_script()
    text = README.read_text()
    assert script.BEGIN in text and script.END in text, f"README.md lost its {script.BEGIN} / {script.END} markers"
    expected = script.table()
    assert script.between_markers(text) == expected, (
        "README.md's settings table is not what Settings.describe() gives: regenerate it with "
        "`.venv/bin/python scripts/settings_table.py --write README.md`")
    for env, _name, default, _help in Settings.describe():
        assert f"| `{env}` | `{default}` |" in expected, env


def test_alertmanagers_api_in_webhooks_fails_pointing_to_the_right_setting():
    for url in ("http://am:9093/api/v1/alerts", "http://am:9093/api/v2/alerts/"):
        with pytest.raises(ConfigError, match=r"SLEUTH_ALERT_WEBHOOKS=.*takes no webhooks.*SLEUTH_ALERTMANAGERS.*http://am:9093"):
            Settings.from_env({"SLEUTH_ALERT_WEBHOOKS": f"http://hook.example/x,{url}"})
    with pytest.raises(ConfigError, match=r"SLEUTH_ALERTMANAGERS=.*base URL"):
        Settings.from_env({"SLEUTH_ALERTMANAGERS": "http://am:9093/api/v2/alerts"})
    with pytest.raises(ConfigError, match=r"SLEUTH_ALERTMANAGERS=.*not an http"):
        Settings.from_env({"SLEUTH_ALERTMANAGERS": "am:9093"})
    settings = Settings.from_env({"SLEUTH_ALERTMANAGERS": "http://am1:9093, http://am2:9093/prefix"})
    assert settings.alertmanager_urls == ["http://am1:9093", "http://am2:9093/prefix"]


def test_alerts_link_to_sleuth_serve():
    assert Settings.from_env({}).serve_base_url == "http://127.0.0.1:18080"
    assert Settings.from_env({"SLEUTH_SERVE_PORT": "9000"}).serve_base_url == "http://127.0.0.1:9000"
    assert Settings.from_env({"SLEUTH_SERVE_URL": "https://sleuth.example"}).serve_base_url == "https://sleuth.example"
    with pytest.raises(ConfigError, match="SLEUTH_SERVE_URL"):
        Settings.from_env({"SLEUTH_SERVE_URL": "sleuth.example"})
