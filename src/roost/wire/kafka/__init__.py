"""Sans-IO Kafka wire codec: requests and responses to and from plain dicts.

Bodies are dicts keyed by Kafka's JSON field names in snake_case (`TopicData` -> `topic_data`).
Decoders fill every field of the version; encoders take defaults for fields left out, skip fields
that exist only in other versions, and raise KafkaCodecError for keys no version has. `records`
(and `bytes`) fields decode to memoryview slices of the frame; `records` encode from a buffer or a
list of buffers that end up in the output list uncopied.

Each message's codec is generated Python source per version (codegen.py).

A server's loop, in short (frames exclude the 4-byte size prefix the transport has cut):

    header, header_end = read_request_header(frame)  # correlation id even if the rest is unknown
    try:
        body = decode_request_body(header, frame, header_end)  # the header is parsed once
    except UnsupportedVersionError:
        if header.api_key == ApiKey.API_VERSIONS:  # KIP-511: answer in the v0 shape
            send([encode_api_versions_fallback(header.correlation_id,
                                               ErrorCode.UNSUPPORTED_VERSION, advertised)])
        ...
    send(encode_response(header, {"responses": [...], "throttle_time_ms": 0}))
"""

from roost.wire.kafka.apis import API_NAMES, SUPPORTED_VERSIONS, ApiKey
from roost.wire.kafka.consumer_protocol import (
    decode_consumer_assignment,
    decode_consumer_subscription,
    encode_consumer_assignment,
    encode_consumer_subscription,
)
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.exceptions import KafkaCodecError, UnknownApiError, UnsupportedVersionError
from roost.wire.kafka.framing import (
    FrameSizeError,
    FrameSplitter,
    RequestHeader,
    decode_request,
    decode_request_body,
    decode_response,
    decode_struct,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
    encode_struct,
    peek_request_header,
    read_request_header,
    request_has_client_id,
)

__all__ = [
    "API_NAMES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "ErrorCode",
    "FrameSizeError",
    "FrameSplitter",
    "KafkaCodecError",
    "RequestHeader",
    "UnknownApiError",
    "UnsupportedVersionError",
    "decode_consumer_assignment",
    "decode_consumer_subscription",
    "decode_request",
    "decode_request_body",
    "decode_response",
    "decode_struct",
    "encode_api_versions_fallback",
    "encode_consumer_assignment",
    "encode_consumer_subscription",
    "encode_request",
    "encode_response",
    "encode_struct",
    "peek_request_header",
    "read_request_header",
    "request_has_client_id",
]
