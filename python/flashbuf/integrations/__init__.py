"""Adapters that plug flashbuf into other libraries' attention hooks (imported on demand, so that
flashbuf never requires the libraries they adapt to)."""
