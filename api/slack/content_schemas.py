"""OpenAPI schemas of what a Slack message carries beyond its columns (issue 27): attachments, Block Kit blocks,
file objects (modern and legacy), bot and user profiles, subtype objects. Shapes follow Slack's reference
(docs/slack-messages.md lists every field and its source).

Every schema is open (`unknown = INCLUDE`, so `additionalProperties: true`): Slack adds fields over time and
Chronicle keeps every one as sent, so a field not listed here still comes back. The listed fields are typed as
Slack documents them; where Slack sends a value of more than one JSON type (an attachment's `ts` is a number in
some payloads and a string in others) the field is declared without a type.
"""

from __future__ import annotations

from marshmallow import INCLUDE, Schema
from marshmallow import fields as mf

from api.schema_fields import plain_fields


class _Open(Schema):
    class Meta:
        unknown = INCLUDE


def _plain(strings: str = "", integers: str = "", booleans: str = "") -> type[Schema]:
    return plain_fields(strings, integers, booleans, base=_Open)


class TextObjectSchema(_Open):
    type = mf.String(required=True, metadata={"description": "plain_text or mrkdwn"})
    text = mf.String(required=True)
    emoji = mf.Boolean()
    verbatim = mf.Boolean()


class BlockSchema(_Open):
    """A layout block: section, context, header, divider, image, actions, rich_text, input, file, video, ..."""

    type = mf.String(required=True)
    block_id = mf.String()
    text = mf.Raw(metadata={"description": "a text object (section, header)"})
    # Named `fields` in JSON (`fields` is taken by marshmallow's Schema).
    section_fields = mf.List(mf.Raw(), data_key="fields",
                             metadata={"description": "section: text objects shown in two columns"})
    accessory = mf.Raw(metadata={"description": "section: an element (image, button, ...)"})
    elements = mf.List(mf.Raw(), metadata={
        "description": "context: images and text objects; actions: interactive elements; rich_text: "
                       "rich_text_section / rich_text_list / rich_text_quote / rich_text_preformatted"})
    image_url = mf.String()
    alt_text = mf.String()
    title = mf.Raw(metadata={"description": "image: a plain_text object"})


class AttachmentFieldSchema(_Open):
    title = mf.String()
    value = mf.String()
    short = mf.Boolean()


class AttachmentSchema(_plain(strings="fallback color pretext author_name author_link author_icon author_subname "
                                     "title title_link text image_url thumb_url footer footer_icon",
                             integers="id image_width image_height")):
    """A secondary attachment (legacy message attachments, link unfurls, message shares)."""

    attachment_fields = mf.List(mf.Nested(AttachmentFieldSchema), data_key="fields")
    ts = mf.Raw(metadata={"description": "Unix time: a number or a string, as Slack sent it"})
    mrkdwn_in = mf.List(mf.String())
    from_url = mf.String(metadata={"description": "an unfurl: the link it unfurls"})
    original_url = mf.String()
    service_name = mf.String()
    service_icon = mf.String()
    blocks = mf.List(mf.Nested(BlockSchema))
    actions = mf.List(mf.Raw())


class FileSchema(_plain(strings="name title mimetype filetype pretty_type user external_type external_url "
                                "url_private url_private_download permalink permalink_public",
                        integers="size created timestamp comments_count", booleans="is_external")):
    """A file object, as a message's `files` list (or the legacy single `file`) carries it."""

    id = mf.String(required=True)
    mode = mf.String(metadata={"description": "hosted, external, snippet, post, tombstone (deleted), "
                                                  "hidden_by_limit (beyond the plan's history)"})
    initial_comment = mf.Raw(metadata={"description": "legacy: the comment the file was shared with"})


class BotProfileSchema(_plain(strings="id app_id name team_id", integers="updated", booleans="deleted")):
    icons = mf.Dict(keys=mf.String(), values=mf.String())


class MessageUserProfileSchema(_plain(strings="avatar_hash image_72 first_name real_name display_name team name",
                                      booleans="is_restricted is_ultra_restricted")):
    pass


class EditedSchema(_plain(strings="user ts")):
    pass


class FileCommentSchema(_plain(strings="id user comment", integers="created timestamp")):
    """file_comment (legacy): the comment and its author."""


class MetadataSchema(_Open):
    event_type = mf.String()
    event_payload = mf.Dict()


class MessageContentFields:
    """The fields a message's content adds to MessageSchema (a mix-in of declared fields)."""

    attachments = mf.List(mf.Nested(AttachmentSchema))
    blocks = mf.List(mf.Nested(BlockSchema))
    file = mf.Nested(FileSchema, metadata={"description": "legacy (2015-era exports): the one file of a "
                                                             "file_share, file_comment or file_mention"})
    bot_profile = mf.Nested(BotProfileSchema)
    user_profile = mf.Nested(MessageUserProfileSchema)
    edited = mf.Nested(EditedSchema, metadata={"description": "the last edit, as Slack reported it"})
    comment = mf.Nested(FileCommentSchema)
    metadata = mf.Nested(MetadataSchema)
    room = mf.Dict(metadata={"description": "huddle_thread: the huddle"})
    icons = mf.Dict()
    app_id = mf.String()
    team = mf.String()
    user_team = mf.String(metadata={"description": "Slack Connect: the author's workspace"})
    source_team = mf.String(metadata={"description": "Slack Connect: the workspace the message came from"})
    client_msg_id = mf.String()
    inviter = mf.String(metadata={"description": "channel_join: who invited the user"})
    topic = mf.String(metadata={"description": "channel_topic: the new topic"})
    purpose = mf.String(metadata={"description": "channel_purpose: the new purpose"})
    old_name = mf.String(metadata={"description": "channel_name: the name before"})
    name = mf.String(metadata={"description": "channel_name: the name after"})
    parent_user_id = mf.String()
    reply_count = mf.Integer(metadata={"description": "a thread head's replies in the archive"})
    reply_users = mf.List(mf.String(), metadata={"description": "as Slack reported them"})
    reply_users_count = mf.Integer()
    latest_reply = mf.String()
    pinned_to = mf.List(mf.String())
    hidden = mf.Boolean()
    upload = mf.Boolean()
    display_as_bot = mf.Boolean()
