from palui.cli import main

main()
