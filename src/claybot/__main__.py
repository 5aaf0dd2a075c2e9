from claybot.cli.main import main

main()
