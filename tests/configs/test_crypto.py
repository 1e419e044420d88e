"""The key ring of secret configs (configs/crypto.py): SKILLYARD_SECRET_KEYS (newest first) wins over
SKILLYARD_SECRET_KEY, else the key file; a bad key names its position and never its value; the key file is written
atomically with mode 0600."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from skillyard.configs.crypto import KEY_ENV, KEY_FILE_SOURCE, KEYS_ENV, Cipher, load_keys, write_key_file
from skillyard.errors import SkillyardError

GENERATE = "Fernet.generate_key()"


def keys(n: int) -> list[str]:
    return [Fernet.generate_key().decode() for _ in range(n)]


def test_secret_keys_wins_over_secret_key(tmp_path):
    """configuration.md: 'When both are set, SKILLYARD_SECRET_KEYS wins'."""
    new, old = keys(2)
    [single] = keys(1)
    ring = load_keys(tmp_path, f" {new} , {old} ", single)
    assert ring.keys == (new.encode(), old.encode()) and ring.source == KEYS_ENV and ring.file is None
    assert not (tmp_path / "secret.key").exists()


def test_secret_key_is_the_one_key_form(tmp_path):
    [single] = keys(1)
    ring = load_keys(tmp_path, None, single)
    assert ring.keys == (single.encode(),) and ring.source == KEY_ENV


def test_a_blank_secret_keys_falls_back_to_the_one_key_form(tmp_path):
    [single] = keys(1)
    assert load_keys(tmp_path, "  ", single).source == KEY_ENV


def test_values_saved_under_an_old_key_decrypt_and_new_ones_use_the_newest(tmp_path):
    new, old = keys(2)
    saved_before = Cipher(old.encode()).encrypt("under-the-old-key")
    cipher = Cipher(load_keys(tmp_path, f"{new},{old}"))
    assert cipher.decrypt(saved_before) == "under-the-old-key"
    assert Fernet(new.encode()).decrypt(cipher.encrypt("fresh").encode()) == b"fresh"
    rotated = cipher.rotate(saved_before)
    assert Fernet(new.encode()).decrypt(rotated.encode()) == b"under-the-old-key"


@pytest.mark.parametrize("position", [1, 2, 3])
def test_a_bad_key_in_the_list_names_its_position(tmp_path, position):
    good = keys(3)
    good[position - 1] = "not-a-fernet-key-zz9"
    with pytest.raises(SkillyardError) as caught:
        load_keys(tmp_path, ",".join(good))
    message = str(caught.value)
    assert f"{KEYS_ENV}: key {position} of 3" in message and GENERATE in message
    assert "not-a-fernet-key-zz9" not in message and not any(k in message for k in good if k != good[position - 1])


def test_an_empty_entry_in_the_list_names_its_position(tmp_path):
    a, b = keys(2)
    with pytest.raises(SkillyardError, match=rf"{KEYS_ENV}: key 2 of 3 is empty"):
        load_keys(tmp_path, f"{a},,{b}")


def test_a_bad_single_key_names_the_variable_not_the_value(tmp_path):
    with pytest.raises(SkillyardError) as caught:
        load_keys(tmp_path, None, "not-a-fernet-key")
    assert str(caught.value).startswith(f"{KEY_ENV} is not a valid Fernet key") and "not-a-fernet-key" not in str(
        caught.value
    )


def test_the_key_file_is_created_0600_with_one_key(tmp_path):
    ring = load_keys(tmp_path / "home")
    path = tmp_path / "home" / "secret.key"
    assert ring.file == path and ring.source == KEY_FILE_SOURCE and len(ring.keys) == 1
    assert path.read_bytes() == ring.keys[0] + b"\n" and (path.stat().st_mode & 0o777) == 0o600
    assert load_keys(tmp_path / "home").keys == ring.keys  # read again, not replaced


def test_the_key_file_holds_one_key_a_line_newest_first(tmp_path):
    new, old = keys(2)
    (tmp_path / "secret.key").write_text(f"{new}\n\n{old}\n")
    assert load_keys(tmp_path).keys == (new.encode(), old.encode())


def test_a_bad_line_of_the_key_file_names_key_and_line(tmp_path):
    new, old = keys(2)
    (tmp_path / "secret.key").write_text(f"{new}\n\nbroken-key-line\n{old}\n")
    with pytest.raises(SkillyardError) as caught:
        load_keys(tmp_path)
    message = str(caught.value)
    assert "key 2 of 3 (line 3)" in message and str(tmp_path / "secret.key") in message and GENERATE in message
    assert "broken-key-line" not in message


def test_an_empty_key_file_says_so(tmp_path):
    (tmp_path / "secret.key").write_text("\n")
    with pytest.raises(SkillyardError, match="holds no key"):
        load_keys(tmp_path)


def test_write_key_file_replaces_it_atomically_with_mode_0600(tmp_path):
    folder = tmp_path / "keys"
    first = load_keys(folder)
    ring = first.with_new_key()
    write_key_file(folder / "secret.key", ring.keys)
    assert load_keys(folder).keys == ring.keys and ring.keys[1:] == first.keys
    assert ((folder / "secret.key").stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["secret.key"]  # no temp file left


def test_the_ring_never_shows_its_keys():
    [key] = keys(1)
    assert key not in repr(Cipher(key.encode()).ring)


def test_decrypting_with_no_matching_key_names_the_source_not_the_value(tmp_path):
    a, b = keys(2)
    token = Cipher(a.encode()).encrypt("value-xyz-123")
    with pytest.raises(SkillyardError, match=KEYS_ENV) as caught:
        Cipher(load_keys(tmp_path, b)).decrypt(token)
    assert "value-xyz-123" not in str(caught.value) and b not in str(caught.value)
