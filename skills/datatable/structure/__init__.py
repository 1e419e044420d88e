"""Structure actions (spec §7.3): creating and deleting tables, adding, changing and deleting fields."""
