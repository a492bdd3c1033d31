"""HTTP errors as exceptions that carry their status and code, turned into the JSON error
body in one place, the error boundary (`sidecar.app.dispatch`)."""

from __future__ import annotations


class APIError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class InvalidParameter(APIError):
    status, code = 400, "invalid_parameter"


class ApiKeyRequired(APIError):
    status, code = 401, "api_key_required"


class InvalidApiKey(APIError):
    status, code = 401, "invalid_api_key"


class InsufficientScope(APIError):
    status, code = 403, "insufficient_scope"


class NotFound(APIError):
    status, code = 404, "not_found"


class MethodNotAllowed(APIError):
    status, code = 405, "method_not_allowed"


class PayloadTooLarge(APIError):
    status, code = 413, "payload_too_large"


class UnsupportedMediaType(APIError):
    status, code = 415, "unsupported_media_type"


class RateLimited(APIError):
    status, code = 429, "rate_limited"


class Unavailable(APIError):
    status, code = 503, "unavailable"


_BY_STATUS: dict[int, type[APIError]] = {
    error.status: error for error in (InvalidParameter, NotFound, MethodNotAllowed,
                                      PayloadTooLarge, UnsupportedMediaType)}


def for_status(status: int, message: str) -> APIError:
    """The contract's error for an HTTP status that aiohttp raised or answered itself: its
    own code where the contract has one, else 400 `invalid_parameter` for a client's error
    and 500 `internal_error` for the node's."""
    fallback = InvalidParameter if status < 500 else APIError
    return _BY_STATUS.get(status, fallback)(message)
