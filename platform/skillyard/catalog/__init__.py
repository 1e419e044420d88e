"""Finding and reading skills: roots, SKILL.md lookup and frontmatter, schemas, gating, lint."""
