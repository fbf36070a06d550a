"""The spill folder's segments are replayed as the job's records: only a private folder will do."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from sleuth.errors import ConfigError
from sleuth.logger.sender import GrpcSink
from sleuth.logger.spill import Spill, private_folder

from tests.logger import collector


def test_a_new_spill_folder_is_made_private(tmp_path):
    folder = private_folder(tmp_path / "spill" / "job" / "rank-00000")
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700


def test_a_link_planted_where_the_folder_goes_is_refused(tmp_path):
    elsewhere = tmp_path / "someone-else"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / "seg-00000001.bin").write_bytes(b"\x04\x00\x00\x00\x01\x00\x00\x00fake")
    (tmp_path / "spill").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="is a link"):
        Spill(tmp_path / "spill", max_bytes=1 << 20, segment_bytes=1 << 16)


def test_a_folder_open_to_others_is_refused_naming_the_fix(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(ConfigError, match="open to other users.*chmod 700"):
        private_folder(folder)


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a folder to another user")
def test_someone_else_s_folder_is_refused(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    with pytest.raises(ConfigError, match="belongs to uid 12345"):
        private_folder(folder)


def a_rank_s_folder(root):
    return root / "job-a" / "rank-00000"


def test_a_link_planted_where_the_private_root_goes_is_refused_before_anything_is_made_through_it(tmp_path):
    # Someone else made /tmp/sleuth-spill-<uid> first, as a link to a folder anyone may write.
    elsewhere = tmp_path / "world-writable"
    elsewhere.mkdir()
    elsewhere.chmod(0o777)
    root = tmp_path / "sleuth-spill-1000"
    root.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=f"spill folder {root} is a link"):
        Spill(a_rank_s_folder(root), root=root, max_bytes=1 << 20, segment_bytes=1 << 16)
    assert list(elsewhere.iterdir()) == []


def test_a_private_root_open_to_others_is_refused_naming_it(tmp_path):
    root = tmp_path / "sleuth-spill-1000"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(ConfigError, match=f"spill folder {root} is open to other users \\(mode 777\\)"):
        private_folder(a_rank_s_folder(root), root=root)


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a folder to another user")
def test_a_private_root_that_is_someone_else_s_is_refused(tmp_path):
    root = tmp_path / "sleuth-spill-1000"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, 12345)
    with pytest.raises(ConfigError, match=f"spill folder {root} belongs to uid 12345"):
        private_folder(a_rank_s_folder(root), root=root)


def test_every_folder_made_on_the_way_is_private(tmp_path):
    umask = os.umask(0o022)  # the usual one, which leaves folders readable by everyone
    try:
        folder = private_folder(a_rank_s_folder(tmp_path / "tmp" / "sleuth-spill-1000"), root=tmp_path / "tmp")
    finally:
        os.umask(umask)
    made = [tmp_path / "tmp", tmp_path / "tmp" / "sleuth-spill-1000", folder.parent, folder]
    assert [stat.S_IMODE(os.lstat(level).st_mode) for level in made] == [0o700] * 4


def test_a_folder_outside_its_private_root_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="does not lie inside its private root"):
        private_folder(tmp_path / "a" / "rank-00000", root=tmp_path / "b")


def test_the_logger_s_spill_is_private_from_its_root_down(tmp_path):
    root = tmp_path / "sleuth-spill-1000"
    root.mkdir()
    root.chmod(0o775)
    with pytest.raises(ConfigError, match=f"spill folder {root} is open to other users"):
        GrpcSink("127.0.0.1:9", spill_dir=a_rank_s_folder(root), spill_root=root)


def test_a_root_of_ours_that_others_could_only_read_is_closed_and_used(tmp_path):
    # What an older logger left: the rank's folder private, the folders above it made with the default mode.
    root = tmp_path / "sleuth-spill-1000"
    root.mkdir()
    root.chmod(0o755)
    folder = private_folder(a_rank_s_folder(root), root=root)
    assert [stat.S_IMODE(os.lstat(level).st_mode) for level in (root, folder)] == [0o700, 0o700]


_JOB = textwrap.dedent("""
    import tempfile
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
    for _ in range(3):
        dist.all_reduce(torch.ones(4))
    dist.destroy_process_group()
""")


def test_an_installed_logger_checks_its_spill_folder_from_the_private_root_down(tmp_path):
    pytest.importorskip("torch")
    root = tmp_path / "sleuth-spill-1000"
    root.mkdir()
    root.chmod(0o777)
    server, collected, port = collector.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
        env.update(SLEUTH_COLLECTOR=f"127.0.0.1:{port}", SLEUTH_SPILL_DIR=str(root), SLEUTH_JOB="spill-root")
        done = subprocess.run([sys.executable, "-c", _JOB], env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.stop(0)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"spill folder {root} is open to other users" in done.stderr
    assert list(root.iterdir()) == [] and collected.records == []
