"""The spill folder's segments are replayed as the job's records: only a private folder will do."""

from __future__ import annotations

import os
import stat

import pytest

from sleuth.errors import ConfigError
from sleuth.logger.spill import Spill, private_folder


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
