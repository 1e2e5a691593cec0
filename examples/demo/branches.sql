INSERT INTO branches SELECT g, 'branch ' || g FROM generate_series(0, 99) g;
