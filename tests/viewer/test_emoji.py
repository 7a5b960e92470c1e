"""api/viewer/emoji.py: Slack shortcodes -> Unicode (the `emoji` package plus Slack's own names).

Expected characters are written out as code points, from Unicode's emoji lists and Slack's names (iamcal/emoji-data),
not computed from the package.
"""

from __future__ import annotations

import pytest
from markupsafe import Markup

from api.viewer import render
from api.viewer.emoji import TABLE, emoji, with_skin_tone
from api.viewer.rich import Names, blocks_html

FLAG_D, FLAG_E = "\U0001F1E9", "\U0001F1EA"  # REGIONAL INDICATOR SYMBOL LETTERs D, E
ZWJ, VS16, KEYCAP = "\u200d", "\ufe0f", "\u20e3"
MAN, WOMAN, GIRL, BOY = "\U0001F468", "\U0001F469", "\U0001F467", "\U0001F466"


@pytest.mark.parametrize(("code", "char"), [
    # The package's alias names, as Slack uses them
    ("thumbsup", "\U0001F44D"), ("+1", "\U0001F44D"), ("-1", "\U0001F44E"), ("thumbsdown", "\U0001F44E"),
    ("slightly_smiling_face", "\U0001F642"), ("heart", "\u2764" + VS16), ("tada", "\U0001F389"),
    ("rolling_on_the_floor_laughing", "\U0001F923"), ("thinking_face", "\U0001F914"), ("spider", "\U0001F577" + VS16),
    # Keycaps
    ("one", "1" + VS16 + KEYCAP), ("zero", "0" + VS16 + KEYCAP), ("hash", "#" + VS16 + KEYCAP),
    ("keycap_star", "*" + VS16 + KEYCAP), ("keycap_ten", "\U0001F51F"),
    # Flags: every country as flag-xx, a few by their short code
    ("flag-de", FLAG_D + FLAG_E), ("de", FLAG_D + FLAG_E), ("flag-us", "\U0001F1FA\U0001F1F8"),
    ("us", "\U0001F1FA\U0001F1F8"), ("uk", "\U0001F1EC\U0001F1E7"), ("gb", "\U0001F1EC\U0001F1E7"),
    ("flag-ua", "\U0001F1FA\U0001F1E6"), ("flag-ch", "\U0001F1E8\U0001F1ED"), ("flag-sark", "\U0001F1E8\U0001F1F6"),
    ("rainbow-flag", "\U0001F3F3" + VS16 + ZWJ + "\U0001F308"),
    # Joined (ZWJ) sequences under Slack's names
    ("man-woman-girl-boy", ZWJ.join([MAN, WOMAN, GIRL, BOY])), ("woman-girl", WOMAN + ZWJ + GIRL),
    ("family", "\U0001F46A"), ("man-shrugging", "\U0001F937" + ZWJ + "\u2642" + VS16),
    ("woman-facepalming", "\U0001F926" + ZWJ + "\u2640" + VS16), ("male-technologist", MAN + ZWJ + "\U0001F4BB"),
    ("female-doctor", WOMAN + ZWJ + "\u2695" + VS16), ("male_mage", "\U0001F9D9" + ZWJ + "\u2642" + VS16),
    ("woman-kiss-man", WOMAN + ZWJ + "\u2764" + VS16 + ZWJ + "\U0001F48B" + ZWJ + MAN),
    ("eye-in-speech-bubble", "\U0001F441" + VS16 + ZWJ + "\U0001F5E8" + VS16),
    # Slack's own names for what the package calls otherwise
    ("spock-hand", "\U0001F596"), ("the_horns", "\U0001F918"), ("face_palm", "\U0001F926"),
    ("large_green_circle", "\U0001F7E2"), ("first_place_medal", "\U0001F947"), ("ladybug", "\U0001F41E"),
    ("simple_smile", "\U0001F642"),
    # Names the package gives another emoji than Slack does
    ("beetle", "\U0001FAB2"), ("umbrella", "\u2602" + VS16), ("snowman", "\u2603" + VS16), ("egg", "\U0001F95A"),
    ("email", "\u2709" + VS16), ("satellite", "\U0001F6F0" + VS16), ("medal", "\U0001F396" + VS16),
    ("guardsman", "\U0001F482"), ("sports_medal", "\U0001F3C5"), ("umbrella_with_rain_drops", "\u2614"),
    # Skin tones: alone (the modifier), appended, and replacing the VS16 of a text-default base
    ("skin-tone-2", "\U0001F3FB"), ("skin-tone-6", "\U0001F3FF"),
    ("+1::skin-tone-2", "\U0001F44D\U0001F3FB"), ("thumbsup::skin-tone-6", "\U0001F44D\U0001F3FF"),
    ("v::skin-tone-3", "\u270C\U0001F3FC"), ("point_up::skin-tone-4", "\u261D\U0001F3FD"),
    ("man-shrugging::skin-tone-4", "\U0001F937\U0001F3FD" + ZWJ + "\u2642" + VS16),
    ("female-doctor::skin-tone-5", WOMAN + "\U0001F3FE" + ZWJ + "\u2695" + VS16),
])
def test_known(code: str, char: str) -> None:
    assert emoji(code) == char


@pytest.mark.parametrize("code", [
    # custom workspace emoji
    "partyparrot", "shipit", "this-is-fine", "catjam", "blob-wave", "meow_party", "trollface", "octocat",
    # the package's names that are not shortcodes Slack writes
    "Aquarius", "A_button_(blood_type)", "_1", "thumbs_up_light_skin_tone", "canada", "flag_for_Germany",
    "flag-zz", "skin-tone-1", "skin-tone-7",
    # not a shortcode
    "", ":smile:", "SMILE", "+1::skin-tone-7", "nope::skin-tone-2", "+1::skin-tone-", "smile ",
])
def test_unknown(code: str) -> None:
    assert emoji(code) is None
    assert code not in TABLE


@pytest.mark.parametrize(("base", "tone", "out"), [
    ("\U0001F44D", "2", "\U0001F44D\U0001F3FB"),
    ("\u270C" + VS16, "6", "\u270C\U0001F3FF"),
    ("\U0001F937" + ZWJ + "\u2640" + VS16, "3", "\U0001F937\U0001F3FC" + ZWJ + "\u2640" + VS16),
    ("\U0001F44D", "1", None), ("\U0001F44D", "7", None), ("", "2", None),
])
def test_with_skin_tone(base: str, tone: str, out: str | None) -> None:
    assert with_skin_tone(base, tone) == out


def test_table_is_a_plain_dict_of_reachable_shortcodes() -> None:
    """render.py looks names up in TABLE directly: every key must be a shortcode its pattern can find."""
    assert type(TABLE) is dict
    assert 1500 <= len(TABLE) <= 4000
    for code in TABLE:
        assert render._EMOJI_RE.fullmatch(f":{code}:"), code


def test_table_comes_from_the_package() -> None:
    """Names the hand-written table never had, straight from the package's alias and English names."""
    assert TABLE["face_with_monocle"] == "\U0001F9D0"
    assert TABLE["rocket"] == "\U0001F680"
    assert TABLE["flag-is"] == "\U0001F1EE\U0001F1F8"


@pytest.mark.parametrize(("text", "html"), [
    (":thumbsup: :+1::skin-tone-2: :flag-de:", "\U0001F44D \U0001F44D\U0001F3FB " + FLAG_D + FLAG_E),
    ("family :man-woman-girl-boy: :one:", "family " + ZWJ.join([MAN, WOMAN, GIRL, BOY]) + " 1" + VS16 + KEYCAP),
    (":partyparrot: and :shipit:", ":partyparrot: and :shipit:"),
    (":shipit::skin-tone-3:", ":shipit:\U0001F3FC"),  # the tone alone is known, as it was before
    (":simple_smile::skin-tone-2:", "\U0001F642\U0001F3FB"),
    (":beetle: :ladybug:", "\U0001FAB2 \U0001F41E"),
])
def test_in_messages(text: str, html: str) -> None:
    out = render.message_html(text, users={}, channels={})
    assert isinstance(out, Markup)
    assert str(out) == html


@pytest.mark.parametrize(("element", "shown"), [
    ({"type": "emoji", "name": "spock-hand", "skin_tone": 4}, "\U0001F596\U0001F3FD"),
    ({"type": "emoji", "name": "flag-de"}, FLAG_D + FLAG_E),
    ({"type": "emoji", "name": "catjam"}, ":catjam:"),
])
def test_in_rich_text(element: dict[str, object], shown: str) -> None:
    items = [{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [element]}]}]
    assert shown in str(blocks_html(items, Names({}, {}, lambda c: f"/c/{c}")))
