pytest_plugins = ["fixtures_pg", "fixtures_ray"]
