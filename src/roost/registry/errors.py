"""The registry's errors, as Confluent's Schema Registry answers them: an HTTP status and a JSON
body `{"error_code": int, "message": str}` (error codes and messages from Confluent's Errors.java;
confluent-kafka's client raises SchemaRegistryError(status, error_code, message) from them)."""

from __future__ import annotations


class RegistryError(Exception):
    """A refusal with Confluent's status, error code and message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: object = "") -> RegistryError:
    return RegistryError(404, 40403, f"Schema {detail} not found".replace("  ", " "))


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
                                     "delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                     "permanently deleted")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def association_not_found(detail: str) -> RegistryError:
    return RegistryError(404, 40410, f"Association not found: {detail}")


def incompatible(subject: str, details: list[str]) -> RegistryError:
    # error_code 409: what the Python client's tests (Confluent Platform 7.6) assert; Confluent
    # moved to 40901 in late 2025 (facts/schema-registry.md §1).
    return RegistryError(409, 409, f'Schema being registered is incompatible with an earlier schema for subject '
                                   f'"{subject}", details: [{", ".join(details)}]')


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. Allowed values "
                                     "are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode {mode}. Valid values are READWRITE, READONLY and IMPORT")


def not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {detail}")


def id_mismatch(detail: str) -> RegistryError:
    return RegistryError(422, 42207, detail)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"Invalid subject {subject!r}")


def schema_too_large(limit: int) -> RegistryError:
    return RegistryError(422, 42209, f"Schema too large: the limit is {limit} bytes")


def unprocessable(detail: str) -> RegistryError:
    """A request body that is not what the endpoint takes (Confluent: 422 with code 422)."""
    return RegistryError(422, 422, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {detail}")


def store_timeout(detail: str) -> RegistryError:
    return RegistryError(500, 50002, f"Timed out waiting for the store: {detail}")


def forward_failed(detail: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {detail}")


def unknown_leader() -> RegistryError:
    return RegistryError(500, 50004, "Unknown leader: no registry writer is elected yet")
