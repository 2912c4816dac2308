"""pmsgate: a safe gateway between an AI guest assistant and the Kross Booking API v5."""
