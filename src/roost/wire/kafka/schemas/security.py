"""SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51), from Kafka's message JSON files of the same names."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

SASL_HANDSHAKE_REQUEST = Message(
    "SaslHandshakeRequest", api_key=17, kind="request", versions="0-1", flexible="none", fields=(
        Field("Mechanism", "string", "0+"),
    ))

SASL_HANDSHAKE_RESPONSE = Message(
    "SaslHandshakeResponse", api_key=17, kind="response", versions="0-1", flexible="none", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("Mechanisms", "[]string", "0+"),
    ))

SASL_AUTHENTICATE_REQUEST = Message(
    "SaslAuthenticateRequest", api_key=36, kind="request", versions="0-2", flexible="2+", fields=(
        Field("AuthBytes", "bytes", "0+"),
    ))

SASL_AUTHENTICATE_RESPONSE = Message(
    "SaslAuthenticateResponse", api_key=36, kind="response", versions="0-2", flexible="2+", fields=(
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+"),
        Field("AuthBytes", "bytes", "0+"),
        Field("SessionLifetimeMs", "int64", "1+", default=0),
    ))

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "DescribeUserScramCredentialsRequest", api_key=50, kind="request", versions="0", flexible="0+", fields=(
        Field("Users", "[]UserName", "0+", nullable="0+", fields=(
            Field("Name", "string", "0+"),
        )),
    ))

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "DescribeUserScramCredentialsResponse", api_key=50, kind="response", versions="0", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ErrorMessage", "string", "0+", nullable="0+"),
        Field("Results", "[]DescribeUserScramCredentialsResult", "0+", fields=(
            Field("User", "string", "0+"),
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
            Field("CredentialInfos", "[]CredentialInfo", "0+", fields=(
                Field("Mechanism", "int8", "0+"),
                Field("Iterations", "int32", "0+"),
            )),
        )),
    ))

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "AlterUserScramCredentialsRequest", api_key=51, kind="request", versions="0", flexible="0+", fields=(
        Field("Deletions", "[]ScramCredentialDeletion", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Mechanism", "int8", "0+"),
        )),
        Field("Upsertions", "[]ScramCredentialUpsertion", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Mechanism", "int8", "0+"),
            Field("Iterations", "int32", "0+"),
            Field("Salt", "bytes", "0+"),
            Field("SaltedPassword", "bytes", "0+"),
        )),
    ))

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "AlterUserScramCredentialsResponse", api_key=51, kind="response", versions="0", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Results", "[]AlterUserScramCredentialsResult", "0+", fields=(
            Field("User", "string", "0+"),
            Field("ErrorCode", "int16", "0+"),
            Field("ErrorMessage", "string", "0+", nullable="0+"),
        )),
    ))
