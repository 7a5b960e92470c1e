"""Slack emoji shortcodes -> Unicode, built in (no network, no images).

`emoji("thumbsup")` -> "👍". The names and characters come from the `emoji` package (its English names and, taking
precedence as `emoji.emojize(..., language="alias")` does, its aliases), plus Slack's own names where they differ,
listed below. `TABLE` is built once at import. A reaction name may carry a skin tone, `+1::skin-tone-2`: the
Fitzpatrick modifier is applied to the base. Custom workspace emoji are not known here: `emoji()` returns None for
them and the caller shows `:name:`.

Slack's names are those of iamcal/emoji-data, the data behind Slack's emoji (`short_names` in emoji.json of
emoji-datasource 16.0.0). Compared with emoji 2.16.0, 1,477 of its 1,972 names give the same character in the
package; the other 495 are covered by the maps below (flag-xx, names written otherwise, 11 names the package gives
another emoji, `skin-tone-N`) but for the characters Python's Unicode database (14.0 on Python 3.11) does not list
as symbols, kept out so that the table holds emoji characters only (tests/viewer/test_render.py checks that): the
emoji newer than Unicode 14 (`:pink_heart:`, `:shaking_face:`, 27 in all), the England/Scotland/Wales flags (tag
characters), `:wavy_dash:` and `:part_alternation_mark:` stay `:name:` text, as in the hand-written table.
The package also knows about 900 names Slack does not (`:thumbs_up:`, `:robot:`, `:harambe:`): those render as
emoji here where Slack shows text, or a custom emoji of that name. Its toned names (`thumbs_up_light_skin_tone`),
country names (`canada`) and names no shortcode can spell (`Aquarius`) are left out.

Differences from the hand-written table this replaced (all 754 of its names are still known):
* `:beetle:` is 🪲 (U+1FAB2), was 🐞 (U+1F41E, Slack's `:ladybug:`), as in Slack since Emoji 13.
* `:medal:` is 🎖️ (military medal, U+1F396 U+FE0F), was 🏅 (Slack's `:sports_medal:`), as in Slack.
* `:umbrella:` is ☂️ (U+2602 U+FE0F), was ☔ (Slack's `:umbrella_with_rain_drops:`), as in Slack.
* `:spider:` is 🕷️ with U+FE0F (fully qualified), was U+1F577 alone.
"""

from __future__ import annotations

import re
import unicodedata

from emoji import EMOJI_DATA, STATUS

_VS16 = "\ufe0f"  # VARIATION SELECTOR-16: emoji presentation for characters that default to text

# --- Slack's names that differ from the package's ----------------------------------------------------------------
# From iamcal/emoji-data (emoji-datasource 16.0.0, emoji.json `short_names`), compared with emoji 2.16.0.

# Slack writes with "-" what the package writes with "_": "man-shrugging" is the package's "man_shrugging".
_HYPHENATED = [f"{who}-{act}" for who in ("man", "woman") for act in (
    "biking", "bouncing-ball", "bowing", "cartwheeling", "facepalming", "frowning", "gesturing-no", "gesturing-ok",
    "getting-haircut", "getting-massage", "golfing", "juggling", "lifting-weights", "mountain-biking",
    "playing-handball", "playing-water-polo", "pouting", "raising-hand", "rowing-boat", "running", "shrugging",
    "surfing", "swimming", "tipping-hand", "walking", "wearing-turban")] + [
    "blond-haired-man", "blond-haired-woman", "eye-in-speech-bubble", "female-detective", "male-detective",
    "rainbow-flag"]

# Families: Slack's "man-woman-boy" is the package's "family_man_woman_boy".
_FAMILIES = [f"{parents}-{kids}" for parents in ("man", "woman", "man-man", "man-woman", "woman-woman")
             for kids in ("boy", "boy-boy", "girl", "girl-boy", "girl-girl")]

# Slack's "male-cook"/"female-cook" and "male_elf"/"female_elf" are the package's "man_cook"/"woman_cook", ...
_JOBS = ["artist", "astronaut", "construction-worker", "cook", "factory-worker", "farmer", "firefighter", "guard",
         "judge", "mechanic", "office-worker", "pilot", "scientist", "singer", "student", "teacher",
         "technologist"]
_FANTASY = ["elf", "fairy", "genie", "mage", "superhero", "supervillain", "vampire", "zombie"]

# Slack's name -> the package's name for the same emoji.
_RENAMED = {
    "bald_person": "person_bald", "barely_sunny": "sun_behind_large_cloud",
    "curly_haired_person": "person_curly_hair", "drum_with_drumsticks": "drum", "eject": "eject_button",
    "face_palm": "facepalm", "face_with_cowboy_hat": "cowboy_hat_face",
    "face_with_finger_covering_closed_lips": "shushing_face", "face_with_one_eyebrow_raised": "raised_eyebrow",
    "face_with_open_mouth_vomiting": "face_vomiting", "female-doctor": "woman_health_worker",
    "female-police-officer": "policewoman", "fencer": "person_fencing", "first_place_medal": "1st_place_medal",
    "giraffe_face": "giraffe", "grinning_face_with_one_large_and_one_small_eye": "zany_face",
    "grinning_face_with_star_eyes": "star-struck", "hand_with_index_and_middle_fingers_crossed": "crossed_fingers",
    "handball": "handball_person", "i_love_you_hand_sign": "love-you_gesture", "juggling": "person_juggling",
    "keycap_star": "asterisk", "kiwifruit": "kiwi_fruit", "knife_fork_plate": "plate_with_cutlery",
    "ladybug": "lady_beetle", "large_blue_square": "blue_square", "large_brown_circle": "brown_circle",
    "large_brown_square": "brown_square", "large_green_circle": "green_circle",
    "large_green_square": "green_square", "large_orange_circle": "orange_circle",
    "large_orange_square": "orange_square", "large_purple_circle": "purple_circle",
    "large_purple_square": "purple_square", "large_red_square": "red_square",
    "large_yellow_circle": "yellow_circle", "large_yellow_square": "yellow_square",
    "lightning": "cloud_with_lightning", "lightning_cloud": "cloud_with_lightning",
    "male-doctor": "man_health_worker", "male-police-officer": "policeman",
    "man-heart-man": "couple_with_heart_man_man", "man-kiss-man": "kiss_man_man",
    "man-with-bunny-ears-partying": "dancing_men", "man-wrestling": "men_wrestling",
    "man_and_woman_holding_hands": "couple", "man_with_beard": "man_beard", "mate_drink": "mate",
    "medal": "military_medal", "men-with-bunny-ears-partying": "dancing_men",
    "mostly_sunny": "sun_behind_small_cloud", "mother_christmas": "mrs_claus", "octagonal_sign": "stop_sign",
    "partly_sunny_rain": "sun_behind_rain_cloud", "person_doing_cartwheel": "cartwheeling",
    "person_with_headscarf": "woman_with_headscarf", "rain_cloud": "cloud_with_rain",
    "red_haired_person": "person_red_hair", "scooter": "kick_scooter", "second_place_medal": "2nd_place_medal",
    "serious_face_with_symbols_covering_mouth": "cursing_face",
    "shocked_face_with_exploding_head": "exploding_head", "shopping_trolley": "shopping_cart",
    "smiling_face_with_3_hearts": "smiling_face_with_hearts",
    "smiling_face_with_smiling_eyes_and_hand_covering_mouth": "hand_over_mouth", "snow_cloud": "cloud_with_snow",
    "spock-hand": "vulcan_salute", "staff_of_aesculapius": "medical_symbol",
    "sun_small_cloud": "sun_behind_small_cloud", "the_horns": "metal", "third_place_medal": "3rd_place_medal",
    "tornado_cloud": "tornado", "white_haired_person": "person_white_hair",
    "woman-heart-man": "couple_with_heart_woman_man", "woman-heart-woman": "couple_with_heart_woman_woman",
    "woman-kiss-man": "kiss_woman_man", "woman-kiss-woman": "kiss_woman_woman",
    "woman-with-bunny-ears-partying": "dancing_women", "woman-wrestling": "women_wrestling",
    "woman_with_beard": "woman_beard", "womans_flat_shoe": "flat_shoe",
    "women-with-bunny-ears-partying": "dancing_women", "wrestlers": "wrestling", "zebra_face": "zebra",
}

# Names the package gives another emoji than Slack does (the package's pick in the comment), and `simple_smile`,
# Slack's own image of a plain smile (no Unicode emoji of its own, not in emoji-data), shown as 🙂.
_SLACK_CHARS = {
    "beetle": "\U0001fab2",  # package: 🐞 lady beetle
    "bride_with_veil": "\U0001f470",  # package: 👰‍♀️
    "egg": "\U0001f95a",  # package: 🍳 cooking
    "email": "\u2709\ufe0f",  # package: 📧 e-mail
    "guardsman": "\U0001f482",  # package: 💂‍♂️
    "man_with_turban": "\U0001f473",  # package: 👳‍♂️
    "ok_woman": "\U0001f646",  # package: 🙆‍♀️
    "satellite": "\U0001f6f0\ufe0f",  # package: 📡 satellite antenna
    "snowman": "\u2603\ufe0f",  # package: ⛄ snowman without snow
    "sun_behind_cloud": "\U0001f325\ufe0f",  # package: ⛅
    "umbrella": "\u2602\ufe0f",  # package: ☔ umbrella with rain drops
    "flag-sark": "\U0001f1e8\U0001f1f6",  # Slack's name for CQ
    "simple_smile": "\U0001f642",
}

# Slack names every flag flag-xx (ISO 3166 alpha-2, from the regional indicator pair), ten also by the code alone:
_FLAG_SHORT = {"cn": "cn", "de": "de", "es": "es", "fr": "fr", "gb": "gb", "uk": "gb", "it": "it", "jp": "jp",
               "kr": "kr", "ru": "ru", "us": "us"}

# The Fitzpatrick modifiers, by Slack's skin tone number; alone, `:skin-tone-2:` is the modifier itself.
_SKIN_TONES = {str(n): chr(0x1F3FB + n - 2) for n in range(2, 7)}
_SKIN_SUFFIX_RE = re.compile(r"(.+)::skin-tone-([2-6])")

# Package names kept: Slack-like ones, not "Aquarius", "A_button_(blood_type)" nor the stray alias "_1"; not the
# toned variants ("thumbs_up_light_skin_tone": Slack writes "+1::skin-tone-2"); no flags (below, as Slack names them).
_NAME_RE = re.compile(r"[a-z0-9+-][a-z0-9_+-]*")
_REGIONAL_A = 0x1F1E6  # REGIONAL INDICATOR SYMBOL LETTER A: a flag is two of them, its ISO 3166 code
# Besides symbols: joiners, keycap parts and the few emoji that Unicode files as punctuation or letters.
_PARTS = frozenset({_VS16, "\u200d", "\u20e3", "#", "*", *"0123456789", "\u203c", "\u2049", "\u2139"})


def _package_names() -> dict[str, str]:
    """The package's names without colons -> emoji, looked up as `emoji.emojize(language="alias")` does: aliases
    first, then English names, fully-qualified emoji (and components) only."""
    fully_qualified = STATUS["fully_qualified"]
    names: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for char, data in EMOJI_DATA.items():
        if data["status"] > fully_qualified:
            continue
        names.setdefault(data["en"][1:-1], char)
        for alias in data.get("alias", ()):
            aliases.setdefault(alias[1:-1], char)
    names.update(aliases)
    return names


def _is_flag(char: str) -> bool:
    return len(char) == 2 and all(_REGIONAL_A <= ord(c) < _REGIONAL_A + 26 for c in char)


def _shown(char: str) -> bool:
    return all(c in _PARTS or unicodedata.category(c) in ("So", "Sk", "Sm") for c in char)


def _build() -> dict[str, str]:
    package = _package_names()  # a name missing below raises KeyError at import, not at render time
    table = {name: char for name, char in package.items()
             if _NAME_RE.fullmatch(name) and "_skin_tone" not in name and not _is_flag(char)}
    for name in _HYPHENATED:
        table[name] = package[name.replace("-", "_")]
    for name in _FAMILIES:
        table[name] = package["family_" + name.replace("-", "_")]
    for job in _JOBS + _FANTASY:
        sep = "-" if job in _JOBS else "_"
        table[f"male{sep}{job}"] = package["man_" + job.replace("-", "_")]
        table[f"female{sep}{job}"] = package["woman_" + job.replace("-", "_")]
    for name, package_name in _RENAMED.items():
        table[name] = package[package_name]
    table.update(_SLACK_CHARS)
    for char in EMOJI_DATA:  # every country as flag-xx
        if _is_flag(char):
            table["flag-" + "".join(chr(ord(c) - _REGIONAL_A + ord("a")) for c in char)] = char
    for name, country in _FLAG_SHORT.items():
        table[name] = table[f"flag-{country}"]
    for tone, modifier in _SKIN_TONES.items():
        table[f"skin-tone-{tone}"] = modifier
    return {name: char for name, char in table.items() if _shown(char)}


TABLE: dict[str, str] = _build()


def with_skin_tone(base: str, tone: str) -> str | None:
    """`base` with Slack's skin tone `tone` ("2".."6") applied after its first code point, or None."""
    modifier = _SKIN_TONES.get(tone)
    if modifier is None or not base:
        return None
    # The modifier replaces a VS16 right after the base character; joined sequences keep their tail.
    rest = base[1:]
    if rest.startswith(_VS16):
        rest = rest[1:]
    return base[0] + modifier + rest


def emoji(shortcode: str) -> str | None:
    """The Unicode text for a Slack shortcode without colons ("thumbsup", "+1::skin-tone-2"), or None if unknown."""
    found = TABLE.get(shortcode)
    if found is not None:
        return found
    m = _SKIN_SUFFIX_RE.fullmatch(shortcode)
    if m is None:
        return None
    base = TABLE.get(m.group(1))
    return with_skin_tone(base, m.group(2)) if base is not None else None
