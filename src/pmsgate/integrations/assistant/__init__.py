"""The assistant platform's ``/v1`` API: client (``client``) and its errors (``errors``)."""
