"""Slack emoji shortcodes -> Unicode, built in (no network, no images).

`emoji("thumbsup")` -> "👍". The table holds the common standard shortcodes Slack uses (the short names of the
emoji set Slack shows, with Slack's aliases such as `+1`/`thumbsup`); each is built from its Unicode character
name with `unicodedata.lookup`, so a misspelt name fails at import, not at render time. Keycaps, flags and a
few joined (ZWJ) sequences are composed from their parts. A reaction name may carry a skin tone,
`+1::skin-tone-2`: the Fitzpatrick modifier is applied to the base. Custom workspace emoji are not known here:
`emoji()` returns None for them and the caller shows `:name:`.
"""

from __future__ import annotations

import re
import unicodedata

_VS16 = "\ufe0f"  # VARIATION SELECTOR-16: emoji presentation for characters that default to text
_ZWJ = "\u200d"

# Shortcode(s) separated by spaces -> Unicode character name. A trailing "+" asks for VS16 after it.
_NAMED = """
grinning = GRINNING FACE
smiley = SMILING FACE WITH OPEN MOUTH
smile = SMILING FACE WITH OPEN MOUTH AND SMILING EYES
grin = GRINNING FACE WITH SMILING EYES
laughing satisfied = SMILING FACE WITH OPEN MOUTH AND TIGHTLY-CLOSED EYES
sweat_smile = SMILING FACE WITH OPEN MOUTH AND COLD SWEAT
rolling_on_the_floor_laughing rofl = ROLLING ON THE FLOOR LAUGHING
joy = FACE WITH TEARS OF JOY
slightly_smiling_face = SLIGHTLY SMILING FACE
upside_down_face = UPSIDE-DOWN FACE
melting_face = MELTING FACE
wink = WINKING FACE
blush = SMILING FACE WITH SMILING EYES
innocent = SMILING FACE WITH HALO
smiling_face_with_3_hearts = SMILING FACE WITH SMILING EYES AND THREE HEARTS
heart_eyes = SMILING FACE WITH HEART-SHAPED EYES
star-struck grinning_face_with_star_eyes = GRINNING FACE WITH STAR EYES
kissing_heart = FACE THROWING A KISS
kissing = KISSING FACE
relaxed = WHITE SMILING FACE +
kissing_closed_eyes = KISSING FACE WITH CLOSED EYES
kissing_smiling_eyes = KISSING FACE WITH SMILING EYES
smiling_face_with_tear = SMILING FACE WITH TEAR
yum = FACE SAVOURING DELICIOUS FOOD
stuck_out_tongue = FACE WITH STUCK-OUT TONGUE
stuck_out_tongue_winking_eye = FACE WITH STUCK-OUT TONGUE AND WINKING EYE
zany_face grinning_face_with_one_large_and_one_small_eye = GRINNING FACE WITH ONE LARGE AND ONE SMALL EYE
stuck_out_tongue_closed_eyes = FACE WITH STUCK-OUT TONGUE AND TIGHTLY-CLOSED EYES
money_mouth_face = MONEY-MOUTH FACE
hugging_face hugs = HUGGING FACE
face_with_hand_over_mouth = SMILING FACE WITH SMILING EYES AND HAND COVERING MOUTH
shushing_face = FACE WITH FINGER COVERING CLOSED LIPS
thinking_face thinking = THINKING FACE
saluting_face = SALUTING FACE
zipper_mouth_face = ZIPPER-MOUTH FACE
face_with_raised_eyebrow = FACE WITH ONE EYEBROW RAISED
neutral_face = NEUTRAL FACE
expressionless = EXPRESSIONLESS FACE
no_mouth = FACE WITHOUT MOUTH
dotted_line_face = DOTTED LINE FACE
smirk = SMIRKING FACE
unamused = UNAMUSED FACE
face_with_rolling_eyes roll_eyes = FACE WITH ROLLING EYES
grimacing = GRIMACING FACE
lying_face = LYING FACE
relieved = RELIEVED FACE
pensive = PENSIVE FACE
sleepy = SLEEPY FACE
drooling_face = DROOLING FACE
sleeping = SLEEPING FACE
mask = FACE WITH MEDICAL MASK
face_with_thermometer = FACE WITH THERMOMETER
face_with_head_bandage = FACE WITH HEAD-BANDAGE
nauseated_face = NAUSEATED FACE
face_vomiting = FACE WITH OPEN MOUTH VOMITING
sneezing_face = SNEEZING FACE
hot_face = OVERHEATED FACE
cold_face = FREEZING FACE
woozy_face = FACE WITH UNEVEN EYES AND WAVY MOUTH
dizzy_face = DIZZY FACE
exploding_head shocked_face_with_exploding_head = SHOCKED FACE WITH EXPLODING HEAD
face_with_cowboy_hat = FACE WITH COWBOY HAT
partying_face = FACE WITH PARTY HORN AND PARTY HAT
sunglasses = SMILING FACE WITH SUNGLASSES
nerd_face = NERD FACE
face_with_monocle = FACE WITH MONOCLE
confused = CONFUSED FACE
worried = WORRIED FACE
slightly_frowning_face = SLIGHTLY FROWNING FACE
white_frowning_face = WHITE FROWNING FACE +
open_mouth = FACE WITH OPEN MOUTH
hushed = HUSHED FACE
astonished = ASTONISHED FACE
flushed = FLUSHED FACE
pleading_face = FACE WITH PLEADING EYES
face_holding_back_tears = FACE HOLDING BACK TEARS
frowning = FROWNING FACE WITH OPEN MOUTH
anguished = ANGUISHED FACE
fearful = FEARFUL FACE
cold_sweat = FACE WITH OPEN MOUTH AND COLD SWEAT
disappointed_relieved = DISAPPOINTED BUT RELIEVED FACE
cry = CRYING FACE
sob = LOUDLY CRYING FACE
scream = FACE SCREAMING IN FEAR
confounded = CONFOUNDED FACE
persevere = PERSEVERING FACE
disappointed = DISAPPOINTED FACE
sweat = FACE WITH COLD SWEAT
weary = WEARY FACE
tired_face = TIRED FACE
yawning_face = YAWNING FACE
triumph = FACE WITH LOOK OF TRIUMPH
rage = POUTING FACE
angry = ANGRY FACE
face_with_symbols_on_mouth serious_face_with_symbols_covering_mouth = SERIOUS FACE WITH SYMBOLS COVERING MOUTH
smiling_imp = SMILING FACE WITH HORNS
imp = IMP
skull = SKULL
skull_and_crossbones = SKULL AND CROSSBONES +
hankey poop shit = PILE OF POO
clown_face = CLOWN FACE
japanese_ogre = JAPANESE OGRE
ghost = GHOST
alien = EXTRATERRESTRIAL ALIEN
space_invader = ALIEN MONSTER
robot_face = ROBOT FACE
smiley_cat = SMILING CAT FACE WITH OPEN MOUTH
smile_cat = GRINNING CAT FACE WITH SMILING EYES
joy_cat = CAT FACE WITH TEARS OF JOY
heart_eyes_cat = SMILING CAT FACE WITH HEART-SHAPED EYES
scream_cat = WEARY CAT FACE
see_no_evil = SEE-NO-EVIL MONKEY
hear_no_evil = HEAR-NO-EVIL MONKEY
speak_no_evil = SPEAK-NO-EVIL MONKEY
kiss = KISS MARK
love_letter = LOVE LETTER
cupid = HEART WITH ARROW
gift_heart = HEART WITH RIBBON
sparkling_heart = SPARKLING HEART
heartpulse = GROWING HEART
heartbeat = BEATING HEART
revolving_hearts = REVOLVING HEARTS
two_hearts = TWO HEARTS
heart_decoration = HEART DECORATION
heavy_heart_exclamation_mark_ornament = HEAVY HEART EXCLAMATION MARK ORNAMENT +
broken_heart = BROKEN HEART
heart = HEAVY BLACK HEART +
orange_heart = ORANGE HEART
yellow_heart = YELLOW HEART
green_heart = GREEN HEART
blue_heart = BLUE HEART
purple_heart = PURPLE HEART
brown_heart = BROWN HEART
black_heart = BLACK HEART
white_heart = WHITE HEART
100 = HUNDRED POINTS SYMBOL
anger = ANGER SYMBOL
boom collision = COLLISION SYMBOL
dizzy = DIZZY SYMBOL
sweat_drops = SPLASHING SWEAT SYMBOL
dash = DASH SYMBOL
hole = HOLE +
speech_balloon = SPEECH BALLOON
left_speech_bubble = LEFT SPEECH BUBBLE +
thought_balloon = THOUGHT BALLOON
zzz = SLEEPING SYMBOL
wave = WAVING HAND SIGN
raised_back_of_hand = RAISED BACK OF HAND
raised_hand_with_fingers_splayed = RAISED HAND WITH FINGERS SPLAYED +
hand raised_hand = RAISED HAND
spock-hand = RAISED HAND WITH PART BETWEEN MIDDLE AND RING FINGERS
ok_hand = OK HAND SIGN
pinching_hand = PINCHING HAND
v = VICTORY HAND +
crossed_fingers hand_with_index_and_middle_fingers_crossed = HAND WITH INDEX AND MIDDLE FINGERS CROSSED
i_love_you_hand_sign = I LOVE YOU HAND SIGN
the_horns sign_of_the_horns = SIGN OF THE HORNS
call_me_hand = CALL ME HAND
point_left = WHITE LEFT POINTING BACKHAND INDEX
point_right = WHITE RIGHT POINTING BACKHAND INDEX
point_up_2 = WHITE UP POINTING BACKHAND INDEX
middle_finger reversed_hand_with_middle_finger_extended = REVERSED HAND WITH MIDDLE FINGER EXTENDED
point_down = WHITE DOWN POINTING BACKHAND INDEX
point_up = WHITE UP POINTING INDEX +
+1 thumbsup = THUMBS UP SIGN
-1 thumbsdown = THUMBS DOWN SIGN
fist raised_fist = RAISED FIST
facepunch punch = FISTED HAND SIGN
left-facing_fist = LEFT-FACING FIST
right-facing_fist = RIGHT-FACING FIST
clap = CLAPPING HANDS SIGN
raised_hands = PERSON RAISING BOTH HANDS IN CELEBRATION
heart_hands = HEART HANDS
open_hands = OPEN HANDS SIGN
palms_up_together = PALMS UP TOGETHER
handshake = HANDSHAKE
pray = PERSON WITH FOLDED HANDS
writing_hand = WRITING HAND +
nail_care = NAIL POLISH
selfie = SELFIE
muscle = FLEXED BICEPS
ear = EAR
nose = NOSE
brain = BRAIN
eyes = EYES
eye = EYE +
tongue = TONGUE
lips = MOUTH
baby = BABY
child = CHILD
boy = BOY
girl = GIRL
adult = ADULT
man = MAN
woman = WOMAN
older_adult = OLDER ADULT
older_man = OLDER MAN
older_woman = OLDER WOMAN
person_frowning = PERSON FROWNING
person_with_pouting_face = PERSON WITH POUTING FACE
no_good = FACE WITH NO GOOD GESTURE
ok_woman = FACE WITH OK GESTURE
information_desk_person = INFORMATION DESK PERSON
raising_hand = HAPPY PERSON RAISING ONE HAND
bow = PERSON BOWING DEEPLY
face_palm = FACE PALM
shrug = SHRUG
runner running = RUNNER
walking = PEDESTRIAN
dancer = DANCER
man_dancing = MAN DANCING
ninja = NINJA
bust_in_silhouette = BUST IN SILHOUETTE
busts_in_silhouette = BUSTS IN SILHOUETTE
footprints = FOOTPRINTS
monkey_face = MONKEY FACE
monkey = MONKEY
dog = DOG FACE
dog2 = DOG
cat = CAT FACE
cat2 = CAT
wolf = WOLF FACE
fox_face = FOX FACE
lion_face = LION FACE
tiger = TIGER FACE
horse = HORSE FACE
unicorn_face = UNICORN FACE
cow = COW FACE
pig = PIG FACE
mouse = MOUSE FACE
hamster = HAMSTER FACE
rabbit = RABBIT FACE
bear = BEAR FACE
koala = KOALA
panda_face = PANDA FACE
sloth = SLOTH
chicken = CHICKEN
penguin = PENGUIN
bird = BIRD
eagle = EAGLE
duck = DUCK
owl = OWL
parrot = PARROT
frog = FROG FACE
turtle = TURTLE
snake = SNAKE
dragon_face = DRAGON FACE
sauropod = SAUROPOD
t-rex = T-REX
whale = SPOUTING WHALE
dolphin flipper = DOLPHIN
fish = FISH
tropical_fish = TROPICAL FISH
shark = SHARK
octopus = OCTOPUS
crab = CRAB
snail = SNAIL
butterfly = BUTTERFLY
bug = BUG
ant = ANT
bee honeybee = HONEYBEE
beetle = LADY BEETLE
spider = SPIDER
bat = BAT
llama = LLAMA
bouquet = BOUQUET
cherry_blossom = CHERRY BLOSSOM
rose = ROSE
sunflower = SUNFLOWER
tulip = TULIP
seedling = SEEDLING
evergreen_tree = EVERGREEN TREE
deciduous_tree = DECIDUOUS TREE
palm_tree = PALM TREE
cactus = CACTUS
herb = HERB
four_leaf_clover = FOUR LEAF CLOVER
maple_leaf = MAPLE LEAF
fallen_leaf = FALLEN LEAF
mushroom = MUSHROOM
apple = RED APPLE
green_apple = GREEN APPLE
pear = PEAR
tangerine = TANGERINE
lemon = LEMON
banana = BANANA
watermelon = WATERMELON
grapes = GRAPES
strawberry = STRAWBERRY
cherries = CHERRIES
peach = PEACH
pineapple = PINEAPPLE
avocado = AVOCADO
eggplant = AUBERGINE
hot_pepper = HOT PEPPER +
corn = EAR OF MAIZE
carrot = CARROT
bread = BREAD
croissant = CROISSANT
cheese_wedge = CHEESE WEDGE
egg = EGG
fried_egg cooking = COOKING
bacon = BACON
hamburger = HAMBURGER
fries = FRENCH FRIES
pizza = SLICE OF PIZZA
hotdog = HOT DOG
taco = TACO
burrito = BURRITO
popcorn = POPCORN
ramen = STEAMING BOWL
spaghetti = SPAGHETTI
sushi = SUSHI
doughnut = DOUGHNUT
cookie = COOKIE
birthday = BIRTHDAY CAKE
cake = SHORTCAKE
cupcake = CUPCAKE
chocolate_bar = CHOCOLATE BAR
candy = CANDY
lollipop = LOLLIPOP
icecream = SOFT ICE CREAM
coffee = HOT BEVERAGE
tea = TEACUP WITHOUT HANDLE
beer = BEER MUG
beers = CLINKING BEER MUGS
clinking_glasses = CLINKING GLASSES
wine_glass = WINE GLASS
cocktail = COCKTAIL GLASS
tropical_drink = TROPICAL DRINK
champagne = BOTTLE WITH POPPING CORK
knife_fork_plate = FORK AND KNIFE WITH PLATE +
fork_and_knife = FORK AND KNIFE
earth_africa = EARTH GLOBE EUROPE-AFRICA
earth_americas = EARTH GLOBE AMERICAS
earth_asia = EARTH GLOBE ASIA-AUSTRALIA
globe_with_meridians = GLOBE WITH MERIDIANS
world_map = WORLD MAP +
mountain = MOUNTAIN +
volcano = VOLCANO
house = HOUSE BUILDING
house_with_garden = HOUSE WITH GARDEN
office = OFFICE BUILDING
hospital = HOSPITAL
bank = BANK
school = SCHOOL
factory = FACTORY
tokyo_tower = TOKYO TOWER
statue_of_liberty = STATUE OF LIBERTY
rainbow = RAINBOW
car red_car = AUTOMOBILE
taxi = TAXI
bus = BUS
truck = DELIVERY TRUCK
bike = BICYCLE
steam_locomotive = STEAM LOCOMOTIVE
bullettrain_side = HIGH-SPEED TRAIN
train2 = TRAIN
airplane = AIRPLANE +
rocket = ROCKET
helicopter = HELICOPTER
ship = SHIP
boat sailboat = SAILBOAT
anchor = ANCHOR
construction = CONSTRUCTION SIGN
rotating_light = POLICE CARS REVOLVING LIGHT
vertical_traffic_light = VERTICAL TRAFFIC LIGHT
hourglass = HOURGLASS
hourglass_flowing_sand = HOURGLASS WITH FLOWING SAND
watch = WATCH
alarm_clock = ALARM CLOCK
stopwatch = STOPWATCH +
timer_clock = TIMER CLOCK +
clock1 = CLOCK FACE ONE OCLOCK
clock3 = CLOCK FACE THREE OCLOCK
clock6 = CLOCK FACE SIX OCLOCK
clock9 = CLOCK FACE NINE OCLOCK
clock12 = CLOCK FACE TWELVE OCLOCK
new_moon = NEW MOON SYMBOL
full_moon = FULL MOON SYMBOL
crescent_moon = CRESCENT MOON
sunny = BLACK SUN WITH RAYS +
star = WHITE MEDIUM STAR
star2 = GLOWING STAR
stars = SHOOTING STAR
cloud = CLOUD +
partly_sunny = SUN BEHIND CLOUD
thunder_cloud_and_rain = THUNDER CLOUD AND RAIN +
umbrella = UMBRELLA WITH RAIN DROPS
zap = HIGH VOLTAGE SIGN
snowflake = SNOWFLAKE +
snowman_without_snow = SNOWMAN WITHOUT SNOW
fire = FIRE
droplet = DROPLET
ocean = WATER WAVE
tornado = CLOUD WITH TORNADO +
fog = FOG +
jack_o_lantern = JACK-O-LANTERN
christmas_tree = CHRISTMAS TREE
fireworks = FIREWORKS
sparkler = FIREWORK SPARKLER
sparkles = SPARKLES
sparkle = SPARKLE +
eight_pointed_black_star = EIGHT POINTED BLACK STAR +
balloon = BALLOON
tada = PARTY POPPER
confetti_ball = CONFETTI BALL
gift = WRAPPED PRESENT
ribbon = RIBBON
trophy = TROPHY
sports_medal medal = SPORTS MEDAL
first_place_medal = FIRST PLACE MEDAL
second_place_medal = SECOND PLACE MEDAL
third_place_medal = THIRD PLACE MEDAL
soccer = SOCCER BALL
baseball = BASEBALL
basketball = BASKETBALL AND HOOP
football = AMERICAN FOOTBALL
tennis = TENNIS RACQUET AND BALL
dart = DIRECT HIT
bowling = BOWLING
video_game = VIDEO GAME
game_die = GAME DIE
jigsaw = JIGSAW PUZZLE PIECE
chess_pawn = BLACK CHESS PAWN +
performing_arts = PERFORMING ARTS
art = ARTIST PALETTE
musical_note = MUSICAL NOTE
notes = MULTIPLE MUSICAL NOTES
microphone = MICROPHONE
headphones = HEADPHONE
guitar = GUITAR
movie_camera = MOVIE CAMERA
clapper = CLAPPER BOARD
tv = TELEVISION
camera = CAMERA
camera_with_flash = CAMERA WITH FLASH
iphone = MOBILE PHONE
calling = MOBILE PHONE WITH RIGHTWARDS ARROW AT LEFT
phone telephone = BLACK TELEPHONE +
computer = PERSONAL COMPUTER
desktop_computer = DESKTOP COMPUTER +
keyboard = KEYBOARD +
printer = PRINTER +
floppy_disk = FLOPPY DISK
cd = OPTICAL DISC
dvd = DVD
battery = BATTERY
electric_plug = ELECTRIC PLUG
bulb = ELECTRIC LIGHT BULB
flashlight = ELECTRIC TORCH
candle = CANDLE +
moneybag = MONEY BAG
dollar = BANKNOTE WITH DOLLAR SIGN
euro = BANKNOTE WITH EURO SIGN
money_with_wings = MONEY WITH WINGS
credit_card = CREDIT CARD
chart = CHART WITH UPWARDS TREND AND YEN SIGN
chart_with_upwards_trend = CHART WITH UPWARDS TREND
chart_with_downwards_trend = CHART WITH DOWNWARDS TREND
bar_chart = BAR CHART
clipboard = CLIPBOARD
pushpin = PUSHPIN
round_pushpin = ROUND PUSHPIN
paperclip = PAPERCLIP
straight_ruler = STRAIGHT RULER
scissors = BLACK SCISSORS +
file_folder = FILE FOLDER
open_file_folder = OPEN FILE FOLDER
page_facing_up = PAGE FACING UP
page_with_curl = PAGE WITH CURL
bookmark_tabs = BOOKMARK TABS
scroll = SCROLL
memo pencil = MEMO
pencil2 = PENCIL +
black_nib = BLACK NIB +
lower_left_ballpoint_pen = LOWER LEFT BALLPOINT PEN +
calendar = TEAR-OFF CALENDAR
date = CALENDAR
spiral_calendar_pad = SPIRAL CALENDAR PAD +
spiral_note_pad = SPIRAL NOTE PAD +
card_index = CARD INDEX
books = BOOKS
book open_book = OPEN BOOK
notebook = NOTEBOOK
ledger = LEDGER
bookmark = BOOKMARK
label = LABEL +
newspaper = NEWSPAPER
email envelope = ENVELOPE +
e-mail = E-MAIL SYMBOL
envelope_with_arrow = ENVELOPE WITH DOWNWARDS ARROW ABOVE
incoming_envelope = INCOMING ENVELOPE
inbox_tray = INBOX TRAY
outbox_tray = OUTBOX TRAY
package = PACKAGE
mailbox = CLOSED MAILBOX WITH RAISED FLAG
lock = LOCK
unlock = OPEN LOCK
closed_lock_with_key = CLOSED LOCK WITH KEY
key = KEY
old_key = OLD KEY +
hammer = HAMMER
hammer_and_wrench = HAMMER AND WRENCH +
wrench = WRENCH
nut_and_bolt = NUT AND BOLT
gear = GEAR +
toolbox = TOOLBOX
magnet = MAGNET
bricks = BRICK
link = LINK SYMBOL
mag = LEFT-POINTING MAGNIFYING GLASS
mag_right = RIGHT-POINTING MAGNIFYING GLASS
microscope = MICROSCOPE
telescope = TELESCOPE
satellite_antenna = SATELLITE ANTENNA
syringe = SYRINGE
pill = PILL
dna = DNA DOUBLE HELIX
test_tube = TEST TUBE
bomb = BOMB
hocho knife = HOCHO
shield = SHIELD +
bell = BELL
no_bell = BELL WITH CANCELLATION STROKE
loudspeaker = PUBLIC ADDRESS LOUDSPEAKER
mega = CHEERING MEGAPHONE
speaker = SPEAKER
mute = SPEAKER WITH CANCELLATION STROKE
loud_sound = SPEAKER WITH THREE SOUND WAVES
wastebasket = WASTEBASKET +
toilet = TOILET
shower = SHOWER
coffin = COFFIN +
crystal_ball = CRYSTAL BALL
moyai = MOYAI
gem = GEM STONE
crown = CROWN
eyeglasses = EYEGLASSES
necktie = NECKTIE
shirt tshirt = T-SHIRT
jeans = JEANS
dress = DRESS
mortar_board = GRADUATION CAP
tophat = TOP HAT
lipstick = LIPSTICK
ring = RING
briefcase = BRIEFCASE
handbag = HANDBAG
school_satchel = SCHOOL SATCHEL
athletic_shoe = ATHLETIC SHOE
white_check_mark = WHITE HEAVY CHECK MARK
heavy_check_mark = HEAVY CHECK MARK +
ballot_box_with_check = BALLOT BOX WITH CHECK +
x = CROSS MARK
negative_squared_cross_mark = NEGATIVE SQUARED CROSS MARK
heavy_multiplication_x = HEAVY MULTIPLICATION X +
heavy_plus_sign = HEAVY PLUS SIGN
heavy_minus_sign = HEAVY MINUS SIGN
heavy_division_sign = HEAVY DIVISION SIGN
question = BLACK QUESTION MARK ORNAMENT
grey_question = WHITE QUESTION MARK ORNAMENT
exclamation heavy_exclamation_mark = HEAVY EXCLAMATION MARK SYMBOL
grey_exclamation = WHITE EXCLAMATION MARK ORNAMENT
bangbang = DOUBLE EXCLAMATION MARK +
interrobang = EXCLAMATION QUESTION MARK +
warning = WARNING SIGN +
no_entry = NO ENTRY
no_entry_sign = NO ENTRY SIGN
octagonal_sign = OCTAGONAL SIGN
children_crossing = CHILDREN CROSSING
recycle = BLACK UNIVERSAL RECYCLING SYMBOL +
o = HEAVY LARGE CIRCLE
white_circle = MEDIUM WHITE CIRCLE
black_circle = MEDIUM BLACK CIRCLE
red_circle = LARGE RED CIRCLE
large_blue_circle = LARGE BLUE CIRCLE
large_green_circle = LARGE GREEN CIRCLE
large_yellow_circle = LARGE YELLOW CIRCLE
large_orange_circle = LARGE ORANGE CIRCLE
large_purple_circle = LARGE PURPLE CIRCLE
black_large_square = BLACK LARGE SQUARE
white_large_square = WHITE LARGE SQUARE
small_red_triangle = UP-POINTING RED TRIANGLE
small_red_triangle_down = DOWN-POINTING RED TRIANGLE
large_orange_diamond = LARGE ORANGE DIAMOND
large_blue_diamond = LARGE BLUE DIAMOND
arrow_up = UPWARDS BLACK ARROW +
arrow_down = DOWNWARDS BLACK ARROW +
arrow_left = LEFTWARDS BLACK ARROW +
arrow_right = BLACK RIGHTWARDS ARROW +
arrow_upper_right = NORTH EAST ARROW +
arrow_lower_right = SOUTH EAST ARROW +
arrow_heading_up = ARROW POINTING RIGHTWARDS THEN CURVING UPWARDS +
arrow_heading_down = ARROW POINTING RIGHTWARDS THEN CURVING DOWNWARDS +
leftwards_arrow_with_hook = LEFTWARDS ARROW WITH HOOK +
arrow_right_hook = RIGHTWARDS ARROW WITH HOOK +
arrows_counterclockwise = ANTICLOCKWISE DOWNWARDS AND UPWARDS OPEN CIRCLE ARROWS
repeat = CLOCKWISE RIGHTWARDS AND LEFTWARDS OPEN CIRCLE ARROWS
back = BACK WITH LEFTWARDS ARROW ABOVE
end = END WITH LEFTWARDS ARROW ABOVE
on = ON WITH EXCLAMATION MARK WITH LEFT RIGHT ARROW ABOVE
soon = SOON WITH RIGHTWARDS ARROW ABOVE
top = TOP WITH UPWARDS ARROW ABOVE
new = SQUARED NEW
free = SQUARED FREE
up = SQUARED UP WITH EXCLAMATION MARK
cool = SQUARED COOL
ok = SQUARED OK
sos = SQUARED SOS
ng = SQUARED NG
id = SQUARED ID
information_source = INFORMATION SOURCE +
copyright = COPYRIGHT SIGN +
registered = REGISTERED SIGN +
tm = TRADE MARK SIGN +
keycap_ten = KEYCAP TEN
infinity = PERMANENT PAPER SIGN +
heavy_dollar_sign = HEAVY DOLLAR SIGN
currency_exchange = CURRENCY EXCHANGE
radioactive_sign = RADIOACTIVE SIGN +
biohazard_sign = BIOHAZARD SIGN +
peace_symbol = PEACE SYMBOL +
yin_yang = YIN YANG +
atom_symbol = ATOM SYMBOL +
checkered_flag = CHEQUERED FLAG
triangular_flag_on_post = TRIANGULAR FLAG ON POST
crossed_flags = CROSSED FLAGS
waving_black_flag = WAVING BLACK FLAG
waving_white_flag = WAVING WHITE FLAG +
skin-tone-2 = EMOJI MODIFIER FITZPATRICK TYPE-1-2
skin-tone-3 = EMOJI MODIFIER FITZPATRICK TYPE-3
skin-tone-4 = EMOJI MODIFIER FITZPATRICK TYPE-4
skin-tone-5 = EMOJI MODIFIER FITZPATRICK TYPE-5
skin-tone-6 = EMOJI MODIFIER FITZPATRICK TYPE-6
"""

# Joined sequences: shortcode -> the character names joined by ZWJ (VS16 marked with "+", as above).
_JOINED = {
    "rainbow-flag": ("WAVING WHITE FLAG +", "RAINBOW"),
    "pirate_flag": ("WAVING BLACK FLAG", "SKULL AND CROSSBONES +"),
    "man-shrugging": ("SHRUG", "MALE SIGN +"),
    "woman-shrugging": ("SHRUG", "FEMALE SIGN +"),
    "man-facepalming": ("FACE PALM", "MALE SIGN +"),
    "woman-facepalming": ("FACE PALM", "FEMALE SIGN +"),
    "male-technologist": ("MAN", "PERSONAL COMPUTER"),
    "female-technologist": ("WOMAN", "PERSONAL COMPUTER"),
    "eye-in-speech-bubble": ("EYE +", "LEFT SPEECH BUBBLE +"),
}

# Keycaps: digit (or #, *) + VS16 + COMBINING ENCLOSING KEYCAP.
_KEYCAPS = {"hash": "#", "keycap_star": "*", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4",
            "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9"}

# Flags: Slack names a few by their short code and every country as flag-xx (ISO 3166 alpha-2).
_FLAG_ALIASES = {"us": "us", "gb": "gb", "uk": "gb", "de": "de", "fr": "fr", "es": "es", "it": "it", "jp": "jp",
                 "kr": "kr", "cn": "cn", "ru": "ru"}
_FLAG_COUNTRIES = ("ar", "at", "au", "be", "br", "ca", "ch", "cl", "cn", "co", "cz", "de", "dk", "eg", "es", "fi",
                   "fr", "gb", "gr", "hk", "hu", "id", "ie", "il", "in", "is", "it", "jp", "ke", "kr", "mx", "my",
                   "ng", "nl", "no", "nz", "pe", "ph", "pk", "pl", "pt", "ro", "ru", "sa", "se", "sg", "th", "tr",
                   "tw", "ua", "us", "vn", "za")

# The Fitzpatrick modifiers, by Slack's skin tone number.
_SKIN_TONES = {str(n): chr(0x1F3FB + n - 2) for n in range(2, 7)}
_SKIN_SUFFIX_RE = re.compile(r"(.+)::skin-tone-([2-6])")


def _char(spec: str) -> str:
    name, vs16 = (spec[:-2], True) if spec.endswith(" +") else (spec, False)
    return unicodedata.lookup(name) + (_VS16 if vs16 else "")


def _flag(country: str) -> str:
    return "".join(chr(0x1F1E6 + ord(c) - ord("a")) for c in country)


def _build() -> dict[str, str]:
    table: dict[str, str] = {}
    for line in _NAMED.strip().splitlines():
        codes, _, spec = line.partition(" = ")
        for code in codes.split():
            table[code] = _char(spec)
    for code, parts in _JOINED.items():
        table[code] = _ZWJ.join(_char(p) for p in parts)
    for code, key in _KEYCAPS.items():
        table[code] = key + _VS16 + "\u20e3"
    for country in _FLAG_COUNTRIES:
        table[f"flag-{country}"] = _flag(country)
    for code, country in _FLAG_ALIASES.items():
        table[code] = _flag(country)
    return table


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
