"""The paper's views, one module per section: method, studies, e2e, claims, quality, environment."""
