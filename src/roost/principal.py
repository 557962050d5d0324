"""Kafka principals: `User:alice`, the identity every request carries to the authorizer.

A connection starts as User:ANONYMOUS (Kafka's principal for a PLAINTEXT listener and for a TLS
client without a certificate); TLS client authentication or SASL replace it once proven.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __post_init__(self) -> None:
        assert self.principal_type and ":" not in self.principal_type, self.principal_type

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`Type:name` as Kafka writes principals in ACLs and `super.users`; ValueError otherwise."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
